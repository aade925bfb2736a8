#pragma once
// Measured per-stage times (issue 8): `lazytrain profile --model M` times
// one stage of each kind (embed, a block, the head) on the device it runs
// on, at two batch sizes, and fits time = a + b * batch for each of the
// executor's uses of it. The fit goes into the hardware YAML under
// `stage_times`, with the shape of the model it was measured for; the cost
// model uses it for that model at that sequence length, and the FLOP model
// otherwise.
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
//     batch_sizes: [4, 8]          # the two it was timed at
//     embed_forward: [a, b]        # seconds for a chunk of `batch` sequences
//     embed_backward: [a, b]
//     block_forward: [a, b]        # no-grad forward (forward and recompute uses)
//     block_backward: [a, b]       # forward under grad + backward (backward use)
//     head_step: [a, b]            # final norm + lm_head + loss, forward + backward
//     block_backward_bytes: [a, b] # device bytes the backward use holds at its
//     head_step_bytes: [a, b]      #   peak beyond the parameters' gradients
//                                  #   (optional: absent, the budget estimates)
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

struct StageTimes {
  std::string model_type;
  int64_t hidden_size = 0, intermediate_size = 0, num_attention_heads = 0, num_key_value_heads = 0,
          head_dim = 0, vocab_size = 0;
  int64_t seq_len = 0;
  std::string device;
  std::vector<int64_t> batch_sizes;
  LinearFit embed_forward, embed_backward, block_forward, block_backward, head_step;
  // Working sets, bytes = a + b * sequences per chunk: what a chunk's
  // backward use of a block, and the head step, hold on the device at their
  // peak beyond their parameters' .grad (which accumulates over chunks and
  // which exec::fixed_bytes counts apart), measured as the second of two
  // runs, so that the gradients are added into as a stage's later chunks
  // add them. Both zero when not measured (a profile from before, or
  // written by hand).
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
  // Seconds for `batch` sequences run through a stage in chunks of `chunk`.
  // Outside the batch sizes timed, a chunk's time per sequence is held to
  // the nearest one timed where the line would make it cheaper: below them
  // no cheaper per sequence than the smallest, above them no dearer than the
  // largest (only a negative intercept does either), and never less than
  // the largest's time.
  double chunked(const LinearFit& fit, int64_t batch, int64_t chunk) const;
};

}  // namespace lt::plan
