#pragma once
// Resolve once, then run. A run's config, its model's config and this
// machine become one typed RunPlan: the device, the compute dtype, the
// executor, the optimizer, the sizes (batch, sequence, the grad-accumulation
// micro-batch and the streaming chunk, each settled once and named apart),
// the streaming schedule, the bytes per memory space and the predicted step
// time, each choice with a one-line reason. `lazytrain train` runs it and
// `lazytrain plan --config` prints it; nothing downstream re-derives it from
// the config. Strings stop at the YAML: past resolve_run everything is an
// enum or a number.
#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "exec/executor.h"
#include "exec/memory_budget.h"
#include "exec/schedule.h"
#include "models/config.h"
#include "plan/state_placement.h"
#include "train/config.h"
#include "train/state_placement.h"

namespace lt::train {

struct RunPlan {
  Device device = Device::cpu();
  // This machine's free memory, or only the profile's (a plan for another
  // machine's GPU: PlanTarget::ProfiledGpu without one here).
  FreeMemoryOf free_memory_of = FreeMemoryOf::ThisMachine;
  DType compute_dtype = DType::F32;  // what the device computes in; masters stay f32
  exec::ExecutorKind executor = exec::ExecutorKind::Resident;
  exec::OptimizerStates optimizer = exec::OptimizerStates::Fp32;
  int64_t optimizer_block = 2048;  // adamw8bit: elements per scale
  int64_t min_8bit_numel = 4096;   // adamw8bit: smaller tensors keep f32 states
  // optim.no_decay as the optimizer matches it (train/no_decay.h).
  std::vector<std::string> no_decay;
  // train.batch_size, train.seq_len, the optimizer's states, the compute
  // width and the device, as the memory budget counts them.
  exec::TrainSizes sizes;
  int64_t grad_accum = 1;       // micro-batches per optimizer step
  int64_t accum_sequences = 0;  // sequences per micro-batch: batch / grad_accum
  // Streaming: sequences per chunk through a stage (> 0, at most
  // accum_sequences), and the schedule, whose chunk_sequences is this one.
  int64_t chunk_sequences = 0;
  exec::Schedule schedule;
  exec::MemoryBudget budget;    // the chosen executor's bytes per space
  double predicted_step_s = 0;  // the planner's, or its cost model's for a named schedule; 0: none
  // Where the stage times that priced predicted_step_s were measured (the
  // profile's stage_times.device: "cpu" or "cuda"); "" for the FLOP model
  // at the profile's gpu_tflops.
  std::string stage_times_device;
  // exec.state_placement: sizes.states_on_disk says which stages' masters
  // and optimizer states live on disk (train/state_placement.h); the bytes
  // that moves a step, and the planner's prediction of the step time the
  // disk adds (0 without the planner).
  plan::StateTraffic state_traffic;
  // Streaming: where the host's share of each stage lives (sizes carries
  // the same states_on_disk and f32_weight_uploads), and the budget.
  HostPlacement placement;
  double predicted_state_disk_s = 0;
  int64_t predicted_gpu_peak_bytes = 0;  // the planner's; 0: none
  std::string plan_description;          // the planner's plan, when it made one
  // Streaming on a GPU: the rate the prediction priced the CPU updates at
  // (parameters a second; 0: no prediction), and the profile's in-run scale
  // it includes (plan::StepPrediction::cpu_update_in_run_scale).
  double predicted_cpu_update_params_per_s = 0;
  double cpu_update_in_run_scale = 1;
  // The cached profile (train/hardware_cache.h) the run was priced with,
  // which the run's measured CPU update rate is kept in; "" when the run
  // named its own exec.hardware or has none.
  std::string cached_profile_path;
  // One line per choice: device, executor, schedule.
  std::vector<std::string> reasons;
  // exec.mode auto's predicted step per executor for a run on the CPU,
  // which chooses as the hardware profile's GPU would: `lazytrain plan`
  // prints it; the CPU run's own log leaves out the GPU's figures. On a
  // GPU the table is among the reasons.
  std::vector<std::string> cpu_price_table;
};

// train.device: cpu; cuda (refused with the reason when this build or
// machine has no GPU); auto = cuda when both are there, else cpu.
Device resolve_train_device(const std::string& name);

// Why the run's whole model cannot come back into host memory at once
// (exec::Executor::sync(), which the generation of data.eval_task math
// needs): a streaming run whose stages' masters and optimizer states are
// partly on disk, when every stage's together exceed the host budget the
// placement had (the reason auto moved them there). Reading them back
// would run the host out of memory in the middle of the run. Empty when
// they fit, or when nothing is on disk or the budget is unknown.
std::string whole_model_read_back_refusal(const RunPlan& p, const models::ModelConfig& model);

// Where the plan is for. `lazytrain plan --config` may plan a GPU run on a
// machine without the GPU (a laptop, before renting the machine): with
// ProfiledGpu, train.device cuda and an exec.hardware profile naming the
// GPU's figures (or `defaults`, the built-in H200 figures), a machine with
// no visible GPU plans for cuda:0 of that profile instead of refusing;
// host figures come from the config (exec.host_memory_gb) or the profile,
// never from this machine's free memory alone. `lazytrain train` always
// resolves for ThisMachine.
enum class PlanTarget { ThisMachine, ProfiledGpu };

// Note [The plan in host memory] (run_plan.cpp): "" when the host memory
// plan `p` of `c` counts fits `free_bytes` (< 0: unknown, no limit), else
// why not, naming the keys that size the batch, or the model. The host
// memory: on the CPU, all of a resident plan's bytes; on a GPU, the plan's
// host space and the step's token ids and targets. resolve_run refuses a
// plan of this machine short of what is free now.
std::string host_memory_shortfall(const TrainConfig& c, const models::ModelConfig& model,
                                  const RunPlan& p, int64_t free_bytes);

// The count is of tensors; the process holds more, in the C library's heap
// around them (its resident memory less what it held at the plan, against
// the count, on the demo on the CPU). Where the step's large tensors have
// mappings of their own (CpuAllocator::kOwnMappingFrom; a micro-batch's
// [tokens x hidden] tensors that large): 3% more at train.batch_size
// 10000, 5% at 4000 after 2 steps and 6% after 8. Where the heap serves
// them: 28% more at batch 2000 (29 MB tensors) after 2 steps, 37% after 6
// and 49% after 20, as the heap fragments; the shares are what was
// measured, not bounds. The GPU's host space holds parameters' states and
// pinned buffers, made once.
constexpr double kHostHeapShareOfLargeTensors = 0.1;
constexpr double kHostHeapShareOfSmallTensors = 0.5;
// kHostHeapShareOfLargeTensors, or OfSmallTensors for a CPU plan whose
// micro-batch's [tokens x hidden] tensors are under kOwnMappingFrom.
double host_heap_share(const TrainConfig& c, const models::ModelConfig& model, const RunPlan& p);
// "" unless the plan fits `free_bytes` (host_memory_shortfall) but not once
// the heap's share (host_heap_share) is added to its count; then why the
// run may run out of memory, naming the keys that size the batch.
// resolve_run warns of it.
std::string host_memory_warning(const TrainConfig& c, const models::ModelConfig& model,
                                const RunPlan& p, int64_t free_bytes);

// The plan for `c` (validated) training `model`. A train.seq_len longer
// than the model's max_position_embeddings is refused, naming both; so is
// a plan that does not fit the host memory free (host_memory_shortfall).
RunPlan resolve_run(const TrainConfig& c, const models::ModelConfig& model,
                    PlanTarget target = PlanTarget::ThisMachine);

}  // namespace lt::train
