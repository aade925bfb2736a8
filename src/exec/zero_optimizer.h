#pragma once
// ZeRO-1 for the CPU-master executors (dist.zero 1; docs/distributed.md):
// every rank holds the whole f32 masters (the executor uploads from them)
// but only its shard's AdamW states, and updates only its shard of the
// masters (exec/zero_shards.h). A step, on every rank together:
//
//   reduce_gradients: the gradients, laid end to end in one f32 buffer,
//       are reduce-scattered: each rank receives the sum over the ranks of
//       its own shard; returns the squared norm of the whole summed
//       gradient (for clipping, the same on every rank);
//   update: AdamW over this rank's pieces (views of the masters), the
//       gradients of its shard;
//   gather_masters: every rank's updated shard all-gathered into every
//       rank's masters.
//
// As an optim::Optimizer it speaks for the whole model: state() returns the
// whole model's states named as one AdamW names them (gathered from every
// rank: a collective, called on every rank), and load_state() takes such a
// state and keeps this rank's pieces, so checkpoints are those of one
// process and a run resumes on any number of ranks, with or without ZeRO.
//
// AdamW's update is elementwise, so a parameter cut between ranks updates
// exactly as whole. AdamW8bit's blockwise states would need shards on its
// block boundaries: not supported (refused by the trainer).
#include <memory>
#include <string>
#include <vector>

#include "exec/cross_rank_sum.h"
#include "exec/zero_shards.h"
#include "nn/module.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"

namespace lt::exec {

class ZeroOptimizer final : public optim::Optimizer {
 public:
  // `masters`: the whole model's f32 contiguous CPU parameters, in model
  // order, the same on every rank. `ranks` outlives this.
  ZeroOptimizer(const nn::NamedParameters& masters, const optim::AdamWOptions& options,
                std::vector<std::string> no_decay, CrossRankSum& ranks);

  size_t size() const override { return masters_.size(); }
  // Updates this rank's pieces of parameters [first, last) whose gradient
  // reduce_gradients() made.
  void update(double lr, double grad_scale, size_t first, size_t last) override;
  void finish_step() override { adam_->finish_step(); }
  void set_bf16_shadow(size_t index, Tensor shadow) override;
  optim::NamedTensors state() const override;
  void load_state(const optim::NamedTensors& state) override;

  // `grads`: per master, its gradient on this rank (f32, the master's
  // element count, on the CPU) or undefined. A parameter has a summed
  // gradient when any rank has one (the others add zeros).
  double reduce_gradients(const std::vector<Tensor>& grads);
  // Parameter i's place in the flat buffer, shaped as the parameter: an
  // executor that downloads gradients there (the offload executor's slabs)
  // saves reduce_gradients a copy and the host a second set of gradients.
  // Overwritten by gather_masters (the weights travel in the same buffer).
  Tensor flat_gradient_view(size_t i) const;
  void gather_masters();

  const ZeroShards& shards() const { return shards_; }
  // This rank's pieces' states, as AdamW names them (exec/zero_checkpoint.h
  // writes them per shard), and the parameters' names.
  optim::NamedTensors shard_state() const { return adam_->state(); }
  const nn::NamedParameters& masters() const { return masters_; }
  // This rank's optimizer states (AdamW's m and v), in bytes: 8 a parameter
  // of its shard.
  int64_t state_bytes() const;

 private:
  nn::NamedParameters masters_;
  CrossRankSum& ranks_;
  ZeroShards shards_;
  nn::NamedParameters pieces_;          // this rank's, views of masters_, in flat order
  std::vector<size_t> first_piece_;     // per master: its piece's index, or pieces_.size()
  std::unique_ptr<optim::AdamW> adam_;  // over pieces_
  Tensor flat_;                         // f32 [world * shard]: gradients, then weights
  Tensor shard_grad_;                   // f32 [shard]: this rank's summed gradients
};

}  // namespace lt::exec
