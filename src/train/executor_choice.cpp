#include "train/executor_choice.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/device.h"
#include "core/error.h"
#include "plan/hardware.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#endif

namespace lt::train {

namespace {

std::string gigabytes(int64_t bytes) {
  return fmt::format("{:.6g} GB ({} bytes)", static_cast<double>(bytes) / 1e9, bytes);
}

int64_t with_margin(int64_t bytes) {
  return bytes + (bytes * kResidentMarginPercent + 99) / 100;
}

// train.batch_size, train.seq_len and optim.name, computing in
// `compute_bytes` per element.
exec::TrainSizes run_sizes(const TrainConfig& c, int64_t compute_bytes) {
  exec::TrainSizes sizes;
  sizes.batch_size = c.train.batch_size;
  sizes.seq_len = c.train.seq_len;
  sizes.optimizer =
      c.optim.name == "adamw8bit" ? exec::OptimizerStates::EightBit : exec::OptimizerStates::Fp32;
  sizes.compute_bytes = compute_bytes;
  sizes.optimizer_block = c.optim.block_size;
  return sizes;
}

}  // namespace

int64_t cuda_free_bytes([[maybe_unused]] int index) {
#ifdef LT_WITH_CUDA
  return static_cast<int64_t>(cuda::device_free_memory(index));
#else
  fail("exec.mode auto: this build has no CUDA backend to ask for free memory");
#endif
}

ExecutorChoice choose_executor(int64_t resident_bytes, int64_t available_bytes,
                               const std::string& available_from) {
  ExecutorChoice c;
  c.resident_bytes = resident_bytes;
  c.available_bytes = available_bytes;
  c.available_from = available_from;
  const int64_t needed = with_margin(resident_bytes);
  if (available_bytes < 0) {
    c.executor = exec::ExecutorKind::Resident;
    c.reason = fmt::format("resident needs {} and {} sets no limit", gigabytes(resident_bytes),
                           available_from);
  } else if (needed <= available_bytes) {
    c.executor = exec::ExecutorKind::Resident;
    c.reason = fmt::format("resident needs {} (+{}% margin: {}), {} has {}",
                           gigabytes(resident_bytes), kResidentMarginPercent, gigabytes(needed),
                           available_from, gigabytes(available_bytes));
  } else {
    c.executor = exec::ExecutorKind::Streaming;
    c.reason = fmt::format("resident would need {} (+{}% margin: {}), {} has only {}",
                           gigabytes(resident_bytes), kResidentMarginPercent, gigabytes(needed),
                           available_from, gigabytes(available_bytes));
  }
  return c;
}

exec::MemoryBudget resident_budget(const TrainConfig& c, const models::ModelConfig& model,
                                   bool on_gpu) {
  exec::TrainSizes sizes = run_sizes(c, on_gpu && c.train.dtype == "bf16" ? 2 : 4);
  sizes.on_gpu = on_gpu;
  const int64_t micro_batch = c.train.batch_size / std::max<int64_t>(1, c.train.grad_accum);
  return exec::resident_bytes_needed(model, sizes, micro_batch, on_gpu);
}

ExecutorChoice choose_for_run(const TrainConfig& c, const models::ModelConfig& model,
                              Device device) {
  const int64_t resident =
      resident_budget(c, model, device.is_cuda()).bytes(exec::MemorySpace::Gpu);
  if (c.exec.mode != "auto") {
    ExecutorChoice set;
    set.executor = exec::parse_executor(c.exec.mode, "exec.mode");
    set.resident_bytes = resident;
    set.available_bytes = -1;
    set.reason = "exec.mode " + c.exec.mode + " is set";
    return set;
  }
  if (c.exec.device_memory_gb > 0) {
    return choose_executor(resident, std::llround(c.exec.device_memory_gb * 1e9),
                           fmt::format("exec.device_memory_gb ({})", c.exec.device_memory_gb));
  }
  if (device.is_cpu()) return choose_executor(resident, -1, "the CPU (no exec.device_memory_gb)");
  // `lazytrain plan --config` for a GPU this machine lacks (PlanTarget::
  // ProfiledGpu, which needs exec.hardware): the profile's GPU.
  if (!cuda_device_visible() && !c.exec.hardware.empty()) {
    const double gb = plan::HardwareProfile::from_file(c.exec.hardware).gpu_memory_gb;
    return choose_executor(resident, std::llround(gb * 1e9),
                           "the gpu_memory_gb of " + c.exec.hardware);
  }
  ExecutorChoice choice = choose_executor(resident, cuda_free_bytes(device.index),
                                          fmt::format("{} (free memory)", device.str()));
  choice.gpu_free_memory = true;
  return choice;
}

exec::TrainSizes streaming_sizes(const TrainConfig& c, bool stand_in) {
  exec::TrainSizes sizes = run_sizes(c, stand_in ? 4 : 2);
  sizes.on_gpu = !stand_in;
  return sizes;
}

std::string streaming_shortfall(const TrainConfig& c, const ExecutorChoice& choice,
                                const models::ModelConfig& model, const exec::Schedule& schedule,
                                bool stand_in) {
  if (choice.available_bytes < 0) return "";
  int64_t needed = exec::bytes_needed(model, streaming_sizes(c, stand_in), schedule)
                       .bytes(exec::MemorySpace::Gpu);
  // A schedule `lazytrain plan` wrote carries the GPU peak it planned for,
  // counted with the profile's measured working sets where it had them
  // (the estimates here overstate a block's). It holds for the planned
  // chunk: a chunk the run gives instead drops it (Schedule::use_chunk).
  const auto planned = schedule.predicted_peak_bytes.find("gpu");
  if (schedule.has_prediction && planned != schedule.predicted_peak_bytes.end() &&
      planned->second > 0)
    needed = std::min(needed, planned->second);
  const int64_t reserve = choice.gpu_free_memory ? kGpuReserveBytes : 0;
  const int64_t available = choice.available_bytes - reserve;
  if (needed <= available) return "";
  return fmt::format(
      "{}; and the streaming schedule exec.schedule ({}) needs {} on the device, {} more than {} "
      "has{}",
      choice.reason, c.exec.schedule, gigabytes(needed), gigabytes(needed - available),
      choice.available_from,
      reserve > 0 ? fmt::format(" less the {} the CUDA libraries take", gigabytes(reserve))
                  : std::string());
}

void check_streaming_fits(const TrainConfig& c, const ExecutorChoice& choice,
                          const models::ModelConfig& model, const exec::Schedule& schedule,
                          bool stand_in) {
  const std::string shortfall = streaming_shortfall(c, choice, model, schedule, stand_in);
  LT_CHECK(shortfall.empty(), "exec.mode auto: nothing fits: ", shortfall,
           "; set exec.schedule: auto to let the planner offload or recompute boundaries");
}

}  // namespace lt::train
