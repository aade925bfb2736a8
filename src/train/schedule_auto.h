#pragma once
// exec.schedule: auto. The planner (src/plan) chooses the streaming
// schedule for the run's model, train.batch_size and train.seq_len, on the
// hardware profile exec.hardware (a YAML file; empty: the planner's
// defaults). A set exec.device_memory_gb is the GPU capacity the plan must
// fit: the stand-in's capacity, or on a GPU the memory the plan may use.
#include <cstdint>
#include <string>
#include <vector>

#include "exec/schedule.h"
#include "models/config.h"
#include "plan/planner.h"
#include "train/config.h"
#include "train/state_placement.h"

namespace lt::train {

// Host memory a plan leaves for what it does not count: the process's
// own (the tokenized dataset, libraries, the allocators' slack). An
// estimate, like kGpuReserveBytes.
inline constexpr int64_t kHostReserveBytes = int64_t{1} << 30;

// What the machine the run trains on has free now; -1 where unknown.
struct FreeMemory {
  int64_t gpu_bytes = -1;   // the training GPU's free memory
  int64_t host_bytes = -1;  // host_bytes_for_this_process (core/host_memory.h)
  int64_t disk_bytes = -1;  // free space where disk boundaries go
  // The file system's free space, and what disk_bytes leaves of it for
  // this run's checkpoints (out.dir on the same file system): so many.
  int64_t disk_free = -1;
  int64_t disk_kept_for_checkpoints = 0;
  int64_t checkpoints_kept_for = 0;
  // Whether train.keep_last sets that number (not the saves the run has
  // left to make), and whether the "disk" is a tmpfs (host memory: none).
  bool checkpoints_kept_by_keep_last = false;
  bool disk_is_host_memory = false;
};

// The bytes of one checkpoint of `model` trained by `c`: its f32 weights
// and the optimizer's states.
int64_t checkpoint_bytes(const TrainConfig& c, const models::ModelConfig& model);

// This machine's FreeMemory for run `c`, given the GPU's (-1: none). The
// host: what is free (MemAvailable, or the cgroup limit's room if less)
// plus the host tensors alive now (the plan counts them), less
// kHostReserveBytes. The disk: the free space of exec.disk_path's file
// system, else out.dir's (or the nearest folder above it that exists),
// less room for train.keep_last + 1 checkpoints of `checkpoint_bytes` when
// out.dir is on the same file system.
// `of` (train/state_placement.h) TheProfile: nothing is known of this machine (-1 each but the
// GPU's).
FreeMemory free_memory_for_run(const TrainConfig& c, FreeMemoryOf of, int64_t gpu_free_bytes,
                               int64_t checkpoint_bytes = 0);

// exec.hardware's value for the built-in figures (plan/hardware.h) and the
// FLOP model, with no profile measured (train/hardware_cache.h).
inline constexpr const char* kDefaultHardware = "defaults";

// exec.hardware's profile (or the built-in figures) as this rank sees it:
// in a run of several ranks, priced on its share of its host's CPU and
// memory bandwidth (plan::rank_share_of_node; under ZeRO-1, dist.zero 1,
// updating 1/N of the parameters).
plan::HardwareProfile configured_hardware(const TrainConfig& c);
// exec.hardware as a message names it: the profile's file, or for
// kDefaultHardware "the built-in defaults (exec.hardware: defaults, an
// H200's figures)".
std::string configured_hardware_name(const TrainConfig& c);

// The profile the plan is made for: exec.hardware, with gpu_memory_gb set
// to exec.device_memory_gb when that is set, else, given the GPU's free
// memory, capped by usable_gpu_gb. host_memory_gb and disk_gb are capped by
// what is free (host_memory_gb also by exec.host_memory_gb when set): a profile records a machine's
// totals (the defaults, the H200 machine's), and a plan past the free host memory would swap or
// fail.
plan::HardwareProfile auto_hardware(const TrainConfig& c, const FreeMemory& free = {});

// The GPU memory a plan may use on the device the run trains on: the
// profile's gpu_memory_gb (a profile records the device's total, and the
// defaults are the H200's), but no more than what the device has free now,
// less kGpuReserveBytes (executor_choice.h). Never below 0.
double usable_gpu_gb(double profile_gb, int64_t free_bytes);

// The planner's schedule for this run; `stand_in`: the CPU stand-in runs it
// (f32 compute), else a GPU (bf16). `chunk_sequences` > 0: the chunk the
// run asks for (exec.micro_batch, settled by resolve_run), else the
// planner chooses. `gpu_free_bytes` >= 0: a GPU run's free
// memory (auto_hardware). `placement` (train/state_placement.h): the stages
// whose masters and optimizer states live on disk (their bytes come off the
// disk the boundaries may use), the weight uploads, and the host budget they
// were placed in, which the plan then fits (one reading of the free memory
// for both). Throws lt::Error with the planner's reason (which memory
// space is short, by how many bytes) when nothing is feasible; training
// then does not start.
plan::Plan plan_for_run(const TrainConfig& c, const models::ModelConfig& model, bool stand_in,
                        FreeMemoryOf of, int64_t chunk_sequences = 0, int64_t gpu_free_bytes = -1,
                        const HostPlacement& placement = {});

// Note [The previous norm's hint] (schedule_auto.cpp): what
// train.clip_with_previous_norm would be predicted to gain over `exact`, the
// plan of run `c` (with the same arguments as plan_for_run); "" when nothing
// worth saying.
std::string previous_norm_hint(const TrainConfig& c, const models::ModelConfig& model,
                               bool stand_in, FreeMemoryOf of, int64_t chunk_sequences,
                               int64_t gpu_free_bytes, const HostPlacement& placement,
                               const plan::Plan& exact);

// One line per fact: placements per boundary, batch and chunk, predicted
// step time and peaks.
std::string describe_plan(const plan::Plan& plan);

}  // namespace lt::train
