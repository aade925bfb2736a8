#pragma once
// measure_profile: what `lazytrain profile` measures on this machine. The
// host side (memory bandwidth, disk read/write through DiskOffloadFile, CPU
// AdamW parameters per second, memory and disk sizes) runs everywhere; the
// GPU side (host<->device copies, bf16 GEMM TFLOP/s) only in CUDA builds
// with a GPU. What cannot be measured keeps the documented default.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "models/config.h"
#include "plan/hardware.h"
#include "plan/stage_times.h"

namespace lt::plan {

struct ProfileOptions {
  std::string disk_path = "/tmp";
  int64_t disk_bytes = int64_t{512} << 20;    // written then read back
  int64_t memory_bytes = int64_t{256} << 20;  // copied for the bandwidth figure
  // Parameters of the optimizer timing: enough that its state (~10-16 B a
  // parameter) is far larger than a server's last-level cache. At 16M
  // (160 MB of 8-bit state) the H200 host's Xeon ran 8-bit AdamW at 5.9 G
  // params/s, moving 94 GB/s, more than its memory's 87; a 7B step's update
  // ran at ~3.7.
  int64_t adam_params = int64_t{64} << 20;
  int repeats = 3;  // each figure is the median of this many runs
};

struct ProfileReport {
  HardwareProfile profile;
  std::vector<std::string> measured;  // the keys that were measured
  std::vector<std::string> notes;     // what was not, and why
};

ProfileReport measure_profile(const ProfileOptions& options);

// The profile's YAML as `lazytrain profile` writes it: each key it did not
// measure (on a machine without a GPU, the GPU's) marked as the default it
// is, so that the file claims no figure of this machine it did not take.
std::string profile_yaml(const ProfileReport& report);

// measure_profile, plus the stage times of `config` at `seq_len` on
// stage_timing_device() at `batch_sizes` (empty: default_stage_batch_sizes):
// what `lazytrain profile --model` writes, and what a run on a GPU measures
// once when it has no profile (train/hardware_cache.h).
ProfileReport measure_profile_for_model(const ProfileOptions& options,
                                        const models::ModelConfig& config, int64_t seq_len,
                                        std::vector<int64_t> batch_sizes = {});

// Billions of parameters per second of one step of AdamW, or AdamW8bit
// with `eight_bit` (default options), over one tensor of `params`; the
// median of `repeats` steps after one. With `gpu_streaming`, as the CUDA
// streaming executor runs it: bf16 gradients, and the bf16 copy for the
// GPU written in the same pass (~12% slower than without,
// bench/RESULTS.md); else as the CPU stand-in: f32, no copy.
double optimizer_gparams_per_s(bool eight_bit, int64_t params, int repeats, bool gpu_streaming);

// The device stage times are measured on: the first GPU when this build
// has CUDA and sees one, else the CPU.
Device stage_timing_device();

// What `lazytrain profile --model` adds: the executor's uses of one stage of
// each kind (embed, a block, the head), timed on `device` (random weights;
// f32 on the CPU, bf16 on CUDA) for chunks of each batch size of `seq_len`
// tokens, the sizes of each use taking turns (Note [Sizes timed in turns],
// plan/profile_timing.h), each size's figure the median of its turns
// (`repeats` of them; at least 5 on a GPU), and kept as a curve through
// the sizes (plan/stage_times.h). On a GPU the turns are batches queued
// back to back after half a second of the same work, so the figures hold
// at the clock its power cap allows under training load.
// The chunk sizes `lazytrain profile --model` times when none are given.
// On a GPU three: the planner's default chunk c (at least kMinChunkTokens
// tokens, plan/planner.h), half of it, and kMaxChunkGrowth times it, the
// largest chunk the planner tries (4, 8 and 32 at seq 1024; 1, 2 and 4
// when c is 1), so that the chunks a run may use are measured, GEMM
// efficiency included, not extrapolated. On the CPU 1 and 2: a large
// model's chunk of 8192 tokens takes minutes there.
std::vector<int64_t> default_stage_batch_sizes(Device device, int64_t seq_len);

// Throws lt::Error unless `batch_sizes` are two or more different sizes
// above 0, as measure_stage_times takes them (`profile` checks before its
// other measuring).
void check_stage_batch_sizes(const std::vector<int64_t>& batch_sizes);

// Times the stages at the batch sizes (check_stage_batch_sizes; taking
// turns), and measures the working sets of a block's backward
// and the head step, fitted through working_set_sizes. On a GPU a size
// past the first two whose measurement would not fit the device's free
// memory (judged from the working sets of the two before it) is left out,
// and `notes` (when given) says so.
StageTimes measure_stage_times(const models::ModelConfig& config, int64_t seq_len,
                               std::vector<int64_t> batch_sizes, Device device, int repeats,
                               std::vector<std::string>* notes = nullptr);

// The head's working set grows with a chunk's tokens only up to one loss
// chunk (lm_head_loss's rows on `device`), more slowly after: a line
// through two sizes on one side of that bend is exact on that side and
// over-estimates on the other, while one through sizes on both sides falls
// short in between. The two sizes the working-set lines are fitted
// through: the smallest and largest of those at or above the bend (the
// larger chunks a plan takes), else of those at or below it; none when no
// two lie on one side. `batch_sizes` ascending.
std::optional<std::pair<int64_t, int64_t>> working_set_sizes(
    const models::ModelConfig& config, int64_t seq_len, const std::vector<int64_t>& batch_sizes,
    Device device);

// GPU copy rates, defined in profile_cuda.cu (CUDA builds only): pinned
// host<->device copies of `bytes`, one direction alone and both at once.
struct CopyRates {
  double h2d_gbps = 0, d2h_gbps = 0, bidir_gbps = 0;
};
CopyRates measure_copy_rates(int device, int64_t bytes, int repeats);

// Pinned uploads and downloads of `bytes` each, back to back on two streams
// of `device`, from construction until destruction: the copy traffic the
// CPU optimizer's rate is measured beside. Its thread waits by polling with
// a sleep, so it takes no core from the optimizer.
class BackgroundCopies {
 public:
  BackgroundCopies(int device, int64_t bytes);
  ~BackgroundCopies();
  BackgroundCopies(const BackgroundCopies&) = delete;
  BackgroundCopies& operator=(const BackgroundCopies&) = delete;
  // Both directions together since the copies started. Throws lt::Error
  // with the CUDA error if the copies stopped on one (a figure measured
  // after that would have been measured alone).
  double gbps() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lt::plan
