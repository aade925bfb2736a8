#pragma once
// The model as a chain of stages: embed -> block 0 .. block L-1 -> head.
// An executor sees only this chain. Each stage owns its parameters and maps
// one boundary tensor to the next; the head maps the last hidden state to
// the loss. Inside a stage, autograd records the ops; across stages, the
// executor drives the order (docs/design.md, "The model as a chain of
// stages").
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "nn/module.h"

namespace lt::models {

// What stages need besides their input boundary tensor.
struct StageContext {
  const RopeTable* rope = nullptr;
  // For the head: next-token targets [B, T] (i64, -100 = not predicted),
  // already shifted so that targets[b, t] is the label for position t.
  Tensor targets;
  // For the head: the number of counted targets in the whole global batch.
  // The head returns (sum of its token losses) / loss_denominator, so the
  // sum over micro-batches is the mean over the global batch.
  double loss_denominator = 1.0;
  // Set by a caller that backpropagates through a block's output but never
  // reads it: the streaming executor's backward use, which runs the block
  // again only to rebuild its saved tensors. The block then skips the work
  // that only the output's value needs (nn::DecoderBlock::forward).
  bool output_unread = false;
};

enum class StageKind { Embed, Block, Head };

class Stage {
 public:
  virtual ~Stage() = default;
  virtual StageKind kind() const = 0;
  const std::string& name() const { return name_; }
  // This stage's parameters with internal names ("embed.tokens.weight",
  // "block.3.attention.q_proj.weight", ...). A parameter shared with an
  // earlier stage (tied embeddings) is not listed again.
  virtual void collect(nn::NamedParameters& out) const = 0;
  // Embed: ids [B, T] -> hidden [B, T, C]. Block: hidden -> hidden.
  // Head: hidden -> 0-dim f32 loss (see StageContext::loss_denominator).
  virtual Tensor forward(const Tensor& x, const StageContext& ctx) const = 0;

 protected:
  explicit Stage(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

using StageChain = std::vector<std::unique_ptr<Stage>>;

}  // namespace lt::models
