#include "train/executor_choice.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/device.h"
#include "core/error.h"
#include "dist/process.h"
#include "models/context_limit.h"
#include "plan/hardware.h"
#include "train/schedule_auto.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#endif

namespace lt::train {

std::string gigabytes(int64_t bytes) {
  return fmt::format("{:.6g} GB ({} bytes)", static_cast<double>(bytes) / 1e9, bytes);
}

namespace {

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
  // Over ranks each runs its share of every micro-batch (dist::shard_rows).
  const int64_t ranks = dist::this_world().size;
  sizes.batch_size = std::max<int64_t>(1, c.train.batch_size / ranks);
  const int64_t micro_batch =
      std::max<int64_t>(1, c.train.batch_size / std::max<int64_t>(1, c.train.grad_accum) / ranks);
  return exec::resident_bytes_needed(model, sizes, micro_batch, on_gpu);
}

DeviceMemory device_memory_for_run(const TrainConfig& c, Device device) {
  if (c.exec.device_memory_gb > 0)
    return {std::llround(c.exec.device_memory_gb * 1e9),
            fmt::format("exec.device_memory_gb ({})", c.exec.device_memory_gb), false};
  if (device.is_cpu()) return {-1, "the CPU (no exec.device_memory_gb)", false};
  // `lazytrain plan --config` for a GPU this machine lacks (PlanTarget::
  // ProfiledGpu, which needs exec.hardware): the profile's GPU, or the
  // built-in defaults' when exec.hardware is defaults.
  if (!cuda_device_visible() && !c.exec.hardware.empty()) {
    const double gb = configured_hardware(c).gpu_memory_gb;
    return {std::llround(gb * 1e9), "the gpu_memory_gb of " + configured_hardware_name(c), false};
  }
  // Over ranks the run trains on GPU LOCAL_RANK (dist/process.h), not the
  // plan's cuda:0.
  const dist::World& world = dist::this_world();
  const Device gpu = world.distributed() ? Device::cuda(world.local_rank) : device;
  return {cuda_free_bytes(gpu.index), fmt::format("{} (free memory)", gpu.str()), true};
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
  const DeviceMemory memory = device_memory_for_run(c, device);
  ExecutorChoice choice = choose_executor(resident, memory.bytes, memory.from);
  choice.gpu_free_memory = memory.gpu_free_memory;
  return choice;
}

ResidentSetFit resident_set_fit(const TrainConfig& c, const models::ModelConfig& model,
                                Device device) {
  ResidentSetFit fit;
  const DeviceMemory memory = device_memory_for_run(c, device);
  if (memory.bytes < 0) return fit;
  const auto counted_with = [&](int64_t batch_size, int64_t grad_accum) {
    TrainConfig sized = c;
    sized.train.batch_size = batch_size;
    sized.train.grad_accum = grad_accum;
    return resident_budget(sized, model, device.is_cuda()).bytes(exec::MemorySpace::Gpu);
  };
  const int64_t batch = c.train.batch_size, accum = c.train.grad_accum;
  const int64_t counted = counted_with(batch, accum);
  if (with_margin(counted) <= memory.bytes) return fit;
  const dist::World& world = dist::this_world();
  const int ranks = world.size;
  // Over ranks the run trains on GPU LOCAL_RANK, as device_memory_for_run reads.
  const std::string on =
      (world.distributed() && device.is_cuda() ? Device::cuda(world.local_rank) : device).str();
  const std::string sized_by =
      fmt::format(
          "train.batch_size {} sequences of train.seq_len {} tokens, in micro-batches of {} "
          "(train.grad_accum {})",
          batch, c.train.seq_len, batch / accum, accum) +
      (ranks > 1 ? fmt::format(", {} a rank over {} ranks,", batch / accum / ranks, ranks) : "");
  if (static_cast<double>(counted) <= kResidentEstimateSlack * static_cast<double>(memory.bytes)) {
    fit.warning = fmt::format(
        "warning: exec.mode resident: {} need an estimated {} on {} (+{}% margin: {}), more than "
        "{} has ({}): the run may run out of device memory at its first step (exec.mode auto "
        "would not run it resident)",
        sized_by, gigabytes(counted), on, kResidentMarginPercent, gigabytes(with_margin(counted)),
        memory.from, gigabytes(memory.bytes));
    return fit;
  }
  // What would run instead: exec.mode auto; resident with fewer sequences
  // a micro-batch (the smallest train.grad_accum that divides the batch
  // and fits with auto's margin); else a smaller batch or sequence; and
  // when one sequence a step does not fit, the model itself is too large.
  std::string instead;
  const int64_t least = counted_with(1, 1);
  if (with_margin(least) > memory.bytes) {
    instead = fmt::format(
        "Set exec.mode auto, which keeps the master weights and optimizer states in host memory "
        "and streams or offloads the model: the model of '{}' alone ({} parameters: its "
        "weights, gradients and optimizer states, and one sequence a step) needs {}",
        models::model_config_file(c.model.path), model.num_parameters(), gigabytes(least));
  } else {
    // Divisors of the batch, above train.grad_accum, whose micro-batches
    // the ranks share evenly (dist::shard_rows).
    std::vector<int64_t> larger_accums;
    for (int64_t d = 1; d * d <= batch; ++d) {
      if (batch % d != 0) continue;
      for (int64_t accum_of : {d, batch / d})
        if (accum_of > accum && (batch / accum_of) % ranks == 0) larger_accums.push_back(accum_of);
    }
    std::sort(larger_accums.begin(), larger_accums.end());
    larger_accums.erase(std::unique(larger_accums.begin(), larger_accums.end()),
                        larger_accums.end());
    const auto fitting = std::find_if(larger_accums.begin(), larger_accums.end(), [&](int64_t g) {
      return with_margin(counted_with(batch, g)) <= memory.bytes;
    });
    instead =
        "Set exec.mode auto, which streams or offloads the model when it does not fit the device "
        "whole, or make the micro-batch smaller" +
        (fitting != larger_accums.end()
             ? fmt::format(": train.grad_accum {} (micro-batches of {}) fits", *fitting,
                           batch / *fitting)
             : std::string(" (none of this batch fits: lower train.batch_size or train.seq_len)"));
  }
  fit.refusal = fmt::format(
      "{}exec.mode resident: {} need an estimated {} on {}, over {:g} times what {} has ({}): "
      "more than the estimate runs high. {}",
      c.where_set("exec.mode"), sized_by, gigabytes(counted), on, kResidentEstimateSlack,
      memory.from, gigabytes(memory.bytes), instead);
  return fit;
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
  if (!shortfall.empty())
    fail_does_not_fit("exec.mode auto: nothing fits: ", shortfall,
                      "; set exec.schedule: auto to let the planner offload or recompute "
                      "boundaries");
}

}  // namespace lt::train
