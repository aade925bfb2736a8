#pragma once
// exec.mode auto: which executor trains (docs/design.md, "The planner": resident
// when it fits, offload when the bf16 weights fit, streaming otherwise; the
// offload executor does not exist yet, so resident when it fits, else
// streaming).
//
// What the resident executor needs on the training device
// (exec::resident_bytes_needed) is compared with what the device has: on a
// GPU the runtime's free memory, or exec.device_memory_gb when set; on the
// CPU nothing is compared (resident) unless exec.device_memory_gb is set,
// which makes the choice testable with the CPU stand-in.
#include <cstdint>
#include <string>

#include "core/device.h"
#include "exec/executor.h"
#include "exec/memory_budget.h"
#include "models/config.h"
#include "train/config.h"

namespace lt::train {

// Free memory of CUDA device `index` as the runtime reports it (throws in
// a build without CUDA).
int64_t cuda_free_bytes(int index);

// Device memory the runtime uses outside what exec::bytes_needed counts:
// lazily loaded library kernels and handles (cuBLASLt, cuDNN) and the
// allocator's rounding. A streaming plan or schedule checked against a
// GPU's free memory leaves this much of it.
inline constexpr int64_t kGpuReserveBytes = int64_t{512} << 20;

// Resident is chosen only when its count, plus this fraction of it, fits:
// the count leaves out the allocator's rounding and fragmentation, the
// CUDA libraries' workspaces and small temporaries of individual ops.
inline constexpr int64_t kResidentMarginPercent = 10;

// exec.mode resident as set is refused only past this many times the
// device's memory (resident_set_fit): the count is an estimate either way.
// Since the count was corrected (MemoryBudget.
// ResidentCountCoversTheMeasuredPeakClosely: within 0.7% over the CPU's
// measured peak) the GPU's has not been measured again: the qwen2.5-0.5b_
// 24gb recipe, resident at batch 16, counts 23.753 GB against the 23.78 GB
// peak the H200 measured before (24.38 GB counted then). The difference is
// about the cuBLASLt workspace (32 MiB a stream, ops/cuda/gemm.cu), which
// the count leaves out and kGpuReserveBytes and auto's margin cover. A run
// counted within it may still fit: it starts, warned about.
inline constexpr double kResidentEstimateSlack = 1.15;

struct ExecutorChoice {
  exec::ExecutorKind executor = exec::ExecutorKind::Resident;
  int64_t resident_bytes = 0;    // exec::resident_bytes_needed on the training device
  int64_t available_bytes = 0;   // < 0: no limit was compared
  std::string available_from;    // where available_bytes came from
  bool gpu_free_memory = false;  // available_bytes is a GPU's free memory
  std::string reason;            // one line: bytes needed against available
};

// "0.2 GB (200000000 bytes)": the figure and the exact count a limit's
// messages compare.
std::string gigabytes(int64_t bytes);

// The memory a run's device has, as exec.mode auto compares the resident
// count with it: exec.device_memory_gb when set; on the CPU no limit (bytes
// < 0); for a GPU this machine lacks (`lazytrain plan --config`, PlanTarget::
// ProfiledGpu) exec.hardware's gpu_memory_gb; else the GPU's free memory.
struct DeviceMemory {
  int64_t bytes = -1;            // < 0: no limit
  std::string from;              // where it came from, for messages
  bool gpu_free_memory = false;  // bytes is a GPU's free memory
};
DeviceMemory device_memory_for_run(const TrainConfig& c, Device device);

// The decision alone: resident when resident_bytes plus
// kResidentMarginPercent of it (rounded up) <= available_bytes, or when available_bytes < 0 (no
// limit); else streaming.
ExecutorChoice choose_executor(int64_t resident_bytes, int64_t available_bytes,
                               const std::string& available_from);

// The streaming executor's sizes for this run: train.batch_size,
// train.seq_len, optim.name's optimizer states, and its compute dtype's
// bytes (f32 on the CPU stand-in, bf16 on a GPU).
exec::TrainSizes streaming_sizes(const TrainConfig& c, bool stand_in);

// What the resident executor needs for this run: train.batch_size and
// grad_accum (one micro-batch's graph at a time), train.seq_len, optim.name;
// on a GPU bf16 compute beside f32 masters when train.dtype is bf16.
exec::MemoryBudget resident_budget(const TrainConfig& c, const models::ModelConfig& model,
                                   bool on_gpu);

// exec.mode as the trainer runs it: resident or streaming as set, or for
// auto the choice on `device` (whose free memory is read on a GPU).
ExecutorChoice choose_for_run(const TrainConfig& c, const models::ModelConfig& model,
                              Device device);

// exec.mode resident as set, whose count (resident_budget) nothing else
// holds to the device's memory (device_memory_for_run): a batch far too
// large for the GPU started, then ran out of memory at its first step.
// `refusal`: why it cannot run, when the count is over kResidentEstimateSlack
// times the memory, naming the keys that size it and what would fit;
// `warning`: a line when it is within that but over the memory with
// exec.mode auto's margin (auto would not run it resident). Both empty when
// it fits, or no limit is known (the CPU without exec.device_memory_gb).
struct ResidentSetFit {
  std::string refusal;
  std::string warning;
};
ResidentSetFit resident_set_fit(const TrainConfig& c, const models::ModelConfig& model,
                                Device device);

// exec.mode auto chose streaming with a fixed exec.schedule: what is short
// when that schedule does not fit either (resident's need, the schedule's
// device bytes from exec::bytes_needed, and by how much they exceed what is
// available: a GPU's free memory less kGpuReserveBytes); empty when it
// fits. `stand_in`: f32 compute.
std::string streaming_shortfall(const TrainConfig& c, const ExecutorChoice& choice,
                                const models::ModelConfig& model, const exec::Schedule& schedule,
                                bool stand_in);

// Throws lt::Error "exec.mode auto: nothing fits: " + the shortfall, if any.
void check_streaming_fits(const TrainConfig& c, const ExecutorChoice& choice,
                          const models::ModelConfig& model, const exec::Schedule& schedule,
                          bool stand_in);

}  // namespace lt::train
