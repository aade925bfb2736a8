#pragma once
// From samples to training batches: a seeded, resumable sampler and the
// two ways of making rows, padding and packing.
//
// A Sample is one tokenized example with per-token labels aligned to its
// ids (labels[i] == ids[i] where the token is trained on, -100 where it is
// masked, e.g. the prompt). A batch row predicts token i+1 from tokens
// 0..i, so targets[i] = labels[i + 1].
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace lt::data {

inline constexpr int32_t kIgnoreLabel = -100;

struct Sample {
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;  // same length as ids
  int64_t line = 0;             // where its row starts in its file (1-based); 0: not from a file
};

struct Batch {
  Tensor ids;                // [B, T] i64
  Tensor targets;            // [B, T] i64, -100 = not predicted
  int64_t tokens = 0;        // real (non-padding) tokens in ids
  int64_t target_count = 0;  // targets != -100
};

struct BatchOptions {
  int64_t batch_size = 8;  // rows per batch
  int64_t seq_len = 512;   // longest row; longer samples are truncated
  bool pack = false;       // pack samples back to back into full rows
  int32_t pad_id = 0;      // id written into padding (never predicted)
  uint64_t seed = 0;
};

// Where the sampler stands; saved in checkpoints for exact resume.
struct SamplerState {
  uint64_t epoch = 0;
  uint64_t position = 0;  // next index into this epoch's permutation
  uint64_t offset = 0;    // packing: tokens of that sample already placed
  bool operator==(const SamplerState&) const = default;
};

// Walks the samples in a seeded random order, a fresh permutation per epoch
// (a pure function of seed and epoch, so a restored state replays exactly).
//
// Padding: each row is one sample, truncated to seq_len, padded to the
// longest row of the batch.
// Packing: samples are laid back to back into rows of exactly seq_len
// tokens; a sample that does not fit in the rest of a row continues in the
// next row (its row-end position predicts the sample's next token, the
// first of the next row). Attention is not blocked at sample boundaries (as
// in most packed fine-tuning), but no target crosses a boundary: the first
// token of a sample is never predicted from the previous sample's last token.
class Batcher {
 public:
  Batcher(std::vector<Sample> samples, const BatchOptions& options);
  Batch next();
  SamplerState state() const { return state_; }
  void restore(const SamplerState& state);
  int64_t num_samples() const { return static_cast<int64_t>(samples_.size()); }
  const BatchOptions& options() const { return options_; }

 private:
  const Sample& current_sample();  // the sample at the state's position
  void advance();                  // to the next sample (next epoch at the end)
  void ensure_permutation();
  Batch next_padded();
  Batch next_packed();

  std::vector<Sample> samples_;
  BatchOptions options_;
  SamplerState state_;
  std::vector<uint32_t> permutation_;
  uint64_t permutation_epoch_ = UINT64_MAX;
};

}  // namespace lt::data
