#pragma once
// exec.state_placement and exec.host_memory_gb as a run of a CPU-master
// executor (streaming, offload, ZenFlow) resolves them (issue 26), with
// exec.weight_uploads (streaming). The host budget is the least of
// exec.host_memory_gb when set, what this machine has free now
// (free_memory_for_run: MemAvailable or the cgroup's room, plus the host
// tensors held already, less kHostReserveBytes) and the hardware profile's
// host_memory_gb. Then, for the stages of the run's model:
//  - host: every stage's masters and optimizer states in host memory;
//  - disk: every stage's on disk;
//  - auto: on disk only the fewest stages that bring the memory budget's
//    host bytes within the budget (plan::place_states, which says in which
//    order and why), none when everything fits.
// A set exec.host_memory_gb that even every stage on disk exceeds stops
// the run before training, naming the key and the bytes short; so does
// auto with the free memory, and auto when the disk under exec.disk_path
// has no room for the stages it would move there.
#include <cstdint>
#include <string>
#include <vector>

#include "exec/memory_budget.h"
#include "exec/schedule.h"
#include "models/config.h"
#include "plan/hardware.h"
#include "train/config.h"

namespace lt::train {

// Whose free memory a plan fits: this machine's (what is free now), or
// only the profile's figures and exec.host_memory_gb, for a plan of
// another machine (resolve_run's PlanTarget::ProfiledGpu on a machine
// without the GPU). resolve_run settles it once and passes it down.
enum class FreeMemoryOf { ThisMachine, TheProfile };

struct HostBudget {
  int64_t bytes = -1;  // -1: unknown (no limit)
  std::string from;    // "exec.host_memory_gb (100 GB)" or "the host memory free now (...)"
};
// The host memory the planner may count on (auto_hardware's host_memory_gb:
// what is free now, exec.host_memory_gb and the profile's figure, the least
// of them), read once: the placement and the planner must fit one number.
HostBudget host_budget(const TrainConfig& c, FreeMemoryOf of);

// What the disk-short message adds of the checkpoints' share of the disk
// (free_memory_for_run's `room`): a plan "short" on a disk with room to
// spare read as a wrong count. Said with the keys that size it.
struct FreeMemory;  // train/schedule_auto.h, which includes this header
std::string disk_short_of_checkpoints(const TrainConfig& c, const FreeMemory& room);

// Where a CPU-master run keeps what the host holds of each stage.
struct HostPlacement {
  std::vector<bool> states_on_disk;  // per stage (embed, blocks, head); empty: none on disk
  // exec.weight_uploads as resolved (exec::TrainSizes::f32_weight_uploads).
  bool f32_weight_uploads = false;
  int64_t host_budget_bytes = -1;  // the budget it was placed within (-1: unknown)
};

// The placement for the run `c` of `model` with `sizes` running `schedule`
// (its host boundaries count), with `host_extra` bytes more the planner will
// need (its disk transit buffers). Appends the decisions to `reasons`.
// exec.weight_uploads auto (on a GPU) takes the bf16 copies when every
// stage then stays in host memory within the budget, else the f32 masters:
// they save 2 bytes a parameter, so fewer stages go to disk, and a disk
// moves states far slower than the GPU's link moves the doubled uploads.
// Throws lt::Error as said above.
HostPlacement resolve_host_placement(const TrainConfig& c, const models::ModelConfig& model,
                                     exec::TrainSizes sizes, const exec::Schedule& schedule,
                                     int64_t host_extra, FreeMemoryOf of,
                                     std::vector<std::string>& reasons);

// The same for exec.mode offload and zenflow (`zenflow_topk` > 0), whose
// host bytes are exec::offload_bytes_needed's for `micro_batch` sequences
// a micro-batch (Note [Offload states on disk], exec/offload_states.cpp);
// it uploads from the bf16 shadows, so f32_weight_uploads stays false.
HostPlacement resolve_offload_placement(const TrainConfig& c, const models::ModelConfig& model,
                                        exec::TrainSizes sizes, int64_t micro_batch,
                                        double zenflow_topk, FreeMemoryOf of,
                                        std::vector<std::string>& reasons);

// The seconds a synchronous offload step waits for its disk stages, at
// the profile `hw`'s disk rates and CPU optimizer rate: the step ends when
// the last stage's update (a disk stage's write-back) is done, so Note
// [Stage states on disk]'s pipeline with no forward behind it
// (plan::predict_update_pipeline), less the same with every stage in host
// memory. 0 with none on disk.
double offload_state_disk_s(const plan::HardwareProfile& hw, const models::ModelConfig& model,
                            const exec::TrainSizes& sizes);

}  // namespace lt::train
