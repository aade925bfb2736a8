#pragma once
// From samples to training batches: a seeded, resumable sampler and the
// two ways of making rows, padding and packing.
//
// A Sample is one tokenized example with per-token labels aligned to its
// ids (labels[i] == ids[i] where the token is trained on, -100 where it is
// masked, e.g. the prompt). A batch row predicts token i+1 from tokens
// 0..i, so targets[i] = labels[i + 1].
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace lt::data {

inline constexpr int32_t kIgnoreLabel = -100;

struct Sample {
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;  // same length as ids
  int64_t line = 0;             // where its row starts in its file (1-based); 0: not from a file
};

// One source of a mixture (mixture.h): its samples, its weight, and its
// name (the file) for errors.
struct WeightedSamples {
  std::vector<Sample> samples;
  double weight = 1.0;
  std::string name;
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
  // One source: the epoch and the next index into its permutation.
  uint64_t epoch = 0;
  uint64_t position = 0;
  uint64_t offset = 0;  // packing: tokens of the current sample already placed
  // Several sources (mixture.h): samples drawn so far. Each source's own
  // epoch and position follow from it (the draws are a function of the
  // seed), so epoch and position stay 0.
  uint64_t draws = 0;
  bool operator==(const SamplerState&) const = default;
};

// Walks the samples in a seeded random order, a fresh permutation per epoch
// (a pure function of seed and epoch, so a restored state replays exactly).
// With several weighted sources, each sample is drawn from one of them as
// mixture.h describes; each source walks its own permutations.
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
  // Every source needs a sample and a weight > 0. One source is the same
  // stream as the constructor above.
  Batcher(std::vector<WeightedSamples> sources, const BatchOptions& options);
  Batch next();
  SamplerState state() const;
  // Throws try_restore's reason when `state` does not fit these samples.
  void restore(const SamplerState& state);
  // Takes `state` and returns "", or leaves the batcher as it was and says
  // why the state does not fit these samples, naming the source and the
  // counts: a position past a source's samples, an offset past the end of
  // its sample, a mixture's state on one dataset or the reverse. Only data
  // other than the state was saved with does that.
  std::string try_restore(const SamplerState& state);
  int64_t num_samples() const;  // over all sources
  const BatchOptions& options() const { return options_; }
  // The source the next sample comes from (for tests and reports).
  size_t current_source() const { return current_source_; }

 private:
  struct Source {
    std::vector<Sample> samples;
    std::string name;
    uint64_t drawn = 0;  // samples taken from it so far
    uint64_t seed = 0;   // of its permutations
    std::vector<uint32_t> permutation;
    uint64_t permutation_epoch = UINT64_MAX;
  };
  std::string source_names() const;  // "a.jsonl, b.jsonl"
  const Sample& current_sample();    // the sample of the current draw
  void advance();                    // to the next draw
  Batch next_padded();
  Batch next_packed();

  std::vector<Source> sources_;
  std::vector<double> weights_;
  BatchOptions options_;
  uint64_t draws_ = 0;
  uint64_t offset_ = 0;
  size_t current_source_ = 0;
};

}  // namespace lt::data
