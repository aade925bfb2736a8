#pragma once
// Measured per-stage times (issue 8): `lazytrain profile --model M` times
// one stage of each kind (embed, a block, the head) on the device it runs
// on, at two or three batch sizes (sequences per chunk), for each of the
// executor's uses of it. Each use's time is piecewise linear through the
// figures (StageCurve): a line through two sizes cannot see that GEMMs run
// faster per token at chunks of 32 than of 4 and 8 (issue 27). It goes
// into the hardware YAML under `stage_times`, with the shape of the model
// it was measured for; the cost model uses it for that model at that
// sequence length, and the FLOP model otherwise.
//
//   stage_times:
//     model_type: qwen2            # the shape: a different one is refused
//     hidden_size: 2048
//     intermediate_size: 11008
//     num_attention_heads: 16
//     num_key_value_heads: 2
//     head_dim: 128
//     vocab_size: 151936
//     seq_len: 1024                # tokens per sequence it was timed at
//     device: cuda                 # where (informational)
//     batch_sizes: [4, 8, 32]      # the sizes it was timed at, ascending
//     embed_forward: [s4, s8, s32] # seconds for a chunk of each size
//     embed_backward: [s4, s8, s32]
//     block_forward: [s4, s8, s32] # no-grad forward (forward and recompute uses)
//     block_backward: [...]        # forward under grad + backward (backward use)
//     head_step: [...]             # final norm + lm_head + loss, forward + backward
//     block_backward_bytes: [a, b] # device bytes the backward use holds at its
//     head_step_bytes: [a, b]      #   peak beyond the parameters' gradients,
//                                  #   a + b * batch (optional: absent, the
//                                  #   budget estimates)
//
// With two batch sizes (`batch_sizes: [4, 8]`, as every profile before
// issue 27) each time is instead the line [a, b], seconds = a + b * batch:
// how such profiles were written, and still are, so that both read alike.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "models/config.h"

namespace YAML {
class Node;
}

namespace lt::plan {

// seconds = a + b * batch.
struct LinearFit {
  double a = 0;
  double b = 0;
  double at(double batch) const { return a + b * batch; }
  bool operator==(const LinearFit&) const = default;
};

// The line through (batch1, seconds1) and (batch2, seconds2); batch1 != batch2.
LinearFit fit_line(int64_t batch1, double seconds1, int64_t batch2, double seconds2);

// One use's seconds for a chunk of `batch` sequences, measured at
// `batches` (ascending, at least two): piecewise linear through the points.
struct StageCurve {
  std::vector<int64_t> batches;
  std::vector<double> seconds;  // at each of `batches`
  // The line `fit` at `batches`: a two-point profile's [a, b].
  static StageCurve line(const LinearFit& fit, std::vector<int64_t> batches);
  // The segment's line that holds at `batch`: the first below the points,
  // the last above them.
  LinearFit segment_at(double batch) const;
  double at(double batch) const { return segment_at(batch).at(batch); }
  // Seconds for `batch` sequences run through a stage in chunks of `chunk`
  // (the whole batch as one chunk when `chunk` is 0 or >= batch). Outside
  // the batch sizes timed, a chunk's time per sequence is held to the
  // nearest one timed where the end segment would make it cheaper: below
  // them no cheaper per sequence than the smallest, above them no dearer
  // than the largest (only a negative intercept does either), and never
  // less than the largest's time.
  double chunked(int64_t batch, int64_t chunk) const;
  bool operator==(const StageCurve&) const = default;
};

struct StageTimes {
  std::string model_type;
  int64_t hidden_size = 0, intermediate_size = 0, num_attention_heads = 0, num_key_value_heads = 0,
          head_dim = 0, vocab_size = 0;
  int64_t seq_len = 0;
  std::string device;
  std::vector<int64_t> batch_sizes;  // ascending; every curve is measured at these
  StageCurve embed_forward, embed_backward, block_forward, block_backward, head_step;
  // Working sets, bytes = a + b * sequences per chunk: what a chunk's
  // backward use of a block, and the head step, hold on the device at their
  // peak beyond their parameters' .grad (which accumulates over chunks and
  // which exec::fixed_bytes counts apart), measured as the second of two
  // runs, so that the gradients are added into as a stage's later chunks
  // add them. Lines, not curves: the head's working set bends at one loss
  // chunk (profile.h, working_set_sizes), and a line through two sizes on
  // one side of the bend is exact there and over-estimates on the other, so
  // the budget never counts short; exec::TrainSizes takes them as lines.
  // Both zero when not measured (a profile from before, or written by hand).
  LinearFit block_backward_bytes, head_step_bytes;
  bool has_working_sets() const { return block_backward_bytes.b > 0 && head_step_bytes.b > 0; }
  std::string source;  // the file it was read from (for errors); not written

  // The shape fields from `config`.
  static StageTimes for_model(const models::ModelConfig& config, int64_t seq_len);
  // Throws lt::Error naming `source` and the key (stage_times.<field>).
  static StageTimes from_yaml(const YAML::Node& node, const std::string& source);
  std::string to_yaml() const;  // the block under `stage_times:`, indented
  // Throws lt::Error naming the file and the first shape key that differs
  // from `config`.
  void check_model(const models::ModelConfig& config) const;
};

}  // namespace lt::plan
