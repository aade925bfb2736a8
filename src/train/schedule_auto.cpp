#include "train/schedule_auto.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <map>

#include "core/allocator.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/regular_file.h"
#include "dist/process.h"
#include "plan/data_parallel.h"
#include "plan/state_placement.h"
#include "train/executor_choice.h"

namespace lt::train {

namespace fs = std::filesystem;

int64_t checkpoint_bytes(const TrainConfig& c, const models::ModelConfig& model) {
  // f32 weights and the optimizer's states. A reservation errs large: 3%
  // and 64 KiB more for the files' headers, the blocks each tensor rounds
  // up to, and the f32 states of tensors too small for 8 bits.
  const int64_t n = model.num_parameters();
  const int64_t bytes =
      4 * n + exec::optimizer_state_bytes(n, streaming_sizes(c, true).optimizer,
                                          std::max<int64_t>(1, c.optim.block_size));
  return bytes + bytes * 3 / 100 + (int64_t{64} << 10);
}

FreeMemory free_memory_for_run(const TrainConfig& c, FreeMemoryOf of, int64_t gpu_free_bytes,
                               int64_t checkpoint_bytes) {
  FreeMemory free;
  free.gpu_bytes = gpu_free_bytes;
  if (of == FreeMemoryOf::TheProfile) return free;
  // The host tensors alive now (the f32 masters, the optimizer's states)
  // are in the plan's host count and in use already.
  free.host_bytes =
      host_bytes_for_this_process(cpu_allocator().stats().current_bytes, kHostReserveBytes);
  // The disk boundaries' folder may not exist yet: its nearest existing
  // ancestor's file system. An error (a folder we may not search) leaves
  // the disk unknown, and the profile's disk_gb stands.
  std::error_code error;
  const fs::path dir =
      nearest_existing_folder(c.exec.disk_path.empty() ? c.out.dir : c.exec.disk_path, error);
  if (error) return free;
  const fs::space_info space = fs::space(dir, error);
  if (error) return free;
  free.disk_bytes = free.disk_free = static_cast<int64_t>(space.available);
  // A tmpfs "disk" is host memory: boundaries placed there would take the
  // memory the plan counts as host a second time. None, then: the plan
  // keeps them on the host, where they are counted.
  struct statfs fs_info {};
  if (::statfs(dir.c_str(), &fs_info) == 0 && fs_info.f_type == TMPFS_MAGIC) {
    free.disk_bytes = 0;
    free.disk_is_host_memory = true;
    return free;
  }
  // Checkpoints go to out.dir: on the same file system they must still
  // fit beside the boundaries, or a save would fail for want of room. At
  // most train.keep_last of them and the one being written exist at once;
  // those in out.dir already (a resumed run) are in the space used, and
  // this run saves every train.save_every steps and at the end.
  struct stat disk_stat {
  }, out_stat{};
  const fs::path out = nearest_existing_folder(c.out.dir, error);
  if (!error && ::stat(dir.c_str(), &disk_stat) == 0 && ::stat(out.c_str(), &out_stat) == 0 &&
      disk_stat.st_dev == out_stat.st_dev) {
    int64_t saved = 0;  // out.dir's checkpoints, when out.dir exists
    if (fs::equivalent(out, c.out.dir, error))
      for (const auto& entry : fs::directory_iterator(out, error))
        if (entry.path().filename().string().rfind("step-", 0) == 0) ++saved;
    const int64_t saves = (c.train.save_every > 0 ? c.train.steps / c.train.save_every : 0) + 1;
    const int64_t reserved =
        std::max<int64_t>(0, std::min(c.train.keep_last + 1, saved + saves) - saved);
    free.checkpoints_kept_for = reserved;
    free.checkpoints_kept_by_keep_last = c.train.keep_last + 1 <= saved + saves;
    free.disk_kept_for_checkpoints = reserved * std::max<int64_t>(0, checkpoint_bytes);
    free.disk_bytes = std::max<int64_t>(0, free.disk_bytes - free.disk_kept_for_checkpoints);
  }
  return free;
}

plan::HardwareProfile configured_hardware(const TrainConfig& c) {
  const plan::HardwareProfile hw = c.exec.hardware.empty() || c.exec.hardware == kDefaultHardware
                                       ? plan::HardwareProfile{}
                                       : plan::HardwareProfile::from_file(c.exec.hardware);
  const dist::World& world = dist::this_world();
  if (!world.distributed()) return hw;
  return plan::rank_share_of_node(hw, dist::ranks_on_this_host(world),
                                  c.dist.zero == 1 ? world.size : 1);
}

std::string configured_hardware_name(const TrainConfig& c) {
  return c.exec.hardware == kDefaultHardware
             ? std::string("the built-in defaults (exec.hardware: defaults, an H200's figures)")
             : c.exec.hardware;
}

plan::HardwareProfile auto_hardware(const TrainConfig& c, const FreeMemory& free) {
  plan::HardwareProfile hw = configured_hardware(c);
  // The stand-in's capacity, or on a GPU the memory the plan may use (to
  // compare schedules at equal GPU memory).
  if (c.exec.device_memory_gb > 0)
    hw.gpu_memory_gb = c.exec.device_memory_gb;
  else if (free.gpu_bytes >= 0)
    hw.gpu_memory_gb = usable_gpu_gb(hw.gpu_memory_gb, free.gpu_bytes);
  if (free.host_bytes >= 0)
    hw.host_memory_gb = std::min(hw.host_memory_gb, free.host_bytes / plan::kBytesPerGB);
  if (c.exec.host_memory_gb > 0)
    hw.host_memory_gb = std::min(hw.host_memory_gb, c.exec.host_memory_gb);
  if (free.disk_bytes >= 0) hw.disk_gb = std::min(hw.disk_gb, free.disk_bytes / plan::kBytesPerGB);
  return hw;
}

namespace {

// When a run's batch does not fit, what would: with exec.micro_batch set,
// the same batch in the planner's own chunking if that fits; else the
// largest of the planner's candidate batch sizes it solved (a short solve:
// this is an error path) that train.grad_accum divides. Empty when none.
std::string smaller_batch_hint(const models::ModelConfig& model, const plan::HardwareProfile& hw,
                               plan::PlanOptions o, int64_t grad_accum) {
  if (o.batch_size <= 1) return "";
  o.time_limit_s = std::min(o.time_limit_s, 5.0);
  if (o.chunk_sequences > 0) {
    plan::PlanOptions own = o;
    own.chunk_sequences = 0;
    const plan::Plan p = plan::make_plan(model, hw, own);
    if (p.feasible)
      return fmt::format(
          "; batch {} fits in chunks of {} sequences: leave exec.micro_batch unset (0) to let "
          "the planner choose",
          o.batch_size, p.schedule.chunk_sequences);
  }
  const int64_t wanted = o.batch_size;
  o.batch_size = 0;
  const plan::Plan free = plan::make_plan(model, hw, o);
  for (auto t = free.batches_tried.rbegin(); t != free.batches_tried.rend(); ++t)
    if (t->batch_size < wanted && t->batch_size % std::max<int64_t>(1, grad_accum) == 0)
      return fmt::format("; train.batch_size {} fits{}", t->batch_size,
                         o.chunk_sequences > 0 ? " with this exec.micro_batch" : "");
  return "";
}

}  // namespace

double usable_gpu_gb(double profile_gb, int64_t free_bytes) {
  const double free_gb =
      static_cast<double>(std::max<int64_t>(0, free_bytes - kGpuReserveBytes)) / plan::kBytesPerGB;
  return std::min(profile_gb, free_gb);
}

plan::Plan plan_for_run(const TrainConfig& c, const models::ModelConfig& model, bool stand_in,
                        FreeMemoryOf of, int64_t chunk_sequences, int64_t gpu_free_bytes,
                        const HostPlacement& placement) {
  exec::TrainSizes sizes = streaming_sizes(c, stand_in);
  sizes.states_on_disk = placement.states_on_disk;
  sizes.f32_weight_uploads = placement.f32_weight_uploads;
  plan::PlanOptions o;
  o.batch_size = sizes.batch_size;
  o.seq_len = sizes.seq_len;
  o.chunk_sequences = chunk_sequences;
  o.micro_batch = c.train.batch_size / std::max<int64_t>(1, c.train.grad_accum);
  o.optimizer = sizes.optimizer;
  o.compute_bytes = sizes.compute_bytes;
  o.on_gpu = sizes.on_gpu;
  o.optimizer_block = sizes.optimizer_block;
  o.states_on_disk = placement.states_on_disk;
  o.f32_weight_uploads = placement.f32_weight_uploads;
  o.updates_during_backward = c.train.clip_with_previous_norm;
  // Both are for one process so far: planned without them when this run
  // has several, so that the budget is the one that runs (the trainer
  // would turn them off after planning otherwise).
  const bool one_process = !dist::this_world().distributed();
  o.stages_on_device = c.exec.stages_on_device == "auto" && one_process;
  o.fused_tail = c.exec.fused_tail == "auto" && one_process;
  FreeMemory free = free_memory_for_run(c, of, gpu_free_bytes, checkpoint_bytes(c, model));
  if (placement.host_budget_bytes >= 0) free.host_bytes = placement.host_budget_bytes;
  plan::HardwareProfile hw = auto_hardware(c, free);
  // States on disk take their share of it before any boundary.
  const plan::StateTraffic states = plan::state_traffic(model, sizes);
  hw.disk_gb =
      std::max(0.0, hw.disk_gb - static_cast<double>(states.write_bytes) / plan::kBytesPerGB);
  plan::Plan p = plan::make_plan(model, hw, o);
  if (!p.feasible) {
    std::string why;
    for (const auto& s : p.shortages) {
      if (s.bytes == 0)  // no placement found, or the instance too large: no count of bytes
        why += "; " + s.detail;
      else
        why += fmt::format("; {} is short by {} bytes ({})", s.space, s.bytes, s.detail);
    }
    fail_does_not_fit(
        "exec.schedule: auto: the planner found no feasible schedule for batch ",
        c.train.batch_size, " x seq ", c.train.seq_len, " on ",
        c.exec.hardware.empty() || c.exec.hardware == kDefaultHardware
            ? std::string("the default hardware profile")
            : c.exec.hardware,
        fmt::format(" with {:.3f} GB of GPU memory, {:.3f} GB of host memory and {:.3f} GB of "
                    "disk ({})",
                    hw.gpu_memory_gb, hw.host_memory_gb, hw.disk_gb,
                    // A plan for another machine reads nothing of this one.
                    of == FreeMemoryOf::ThisMachine ? "each no more than is free now"
                                                    : "the profile's, not this machine's"),
        why.empty() ? std::string("; no reason given") : why,
        smaller_batch_hint(model, hw, o, c.train.grad_accum));
  }
  return p;
}

// Note [The previous norm's hint]
// With exact clipping the CPU's updates start when the whole backward has
// ended (the norm is needed first), so they hide behind the next forward
// alone, and the planner keeps the fused tail short for them (its blocks
// must be updated before the tail starts): the run says what
// train.clip_with_previous_norm would be predicted to gain (the 3B at 24 GB
// on an H100: 0.960x resident exact, 0.987x with it, where the plans were
// priced 0.8% apart), a change of numerics only the user can choose. The
// second plan is made only when the first was quick to solve.
constexpr double kHintAtLeast = 0.005;  // of the step: a gain below this is not said
constexpr double kHintSolveLimitS = 2;  // the first plan's solve: longer, no second one

std::string previous_norm_hint(const TrainConfig& c, const models::ModelConfig& model,
                               bool stand_in, FreeMemoryOf of, int64_t chunk_sequences,
                               int64_t gpu_free_bytes, const HostPlacement& placement,
                               const plan::Plan& exact) {
  const double step_s = exact.prediction.step_s;
  if (c.train.clip_with_previous_norm || c.train.grad_clip <= 0 ||
      dist::this_world().distributed() || exact.solve_s > kHintSolveLimitS)
    return "";
  TrainConfig with = c;
  with.train.clip_with_previous_norm = true;
  plan::Plan early;
  try {
    early = plan_for_run(with, model, stand_in, of, chunk_sequences, gpu_free_bytes, placement);
  } catch (const Error&) {
    return "";  // only a hint: the run goes on as planned
  }
  const double gain = 1 - early.prediction.step_s / step_s;
  if (gain < kHintAtLeast) return "";
  return fmt::format(
      "clipping: exact (train.grad_clip {:g}): the CPU's updates start once the whole backward "
      "has ended and must hide behind the next forward ({:.4f} s of them exposed a step in this "
      "plan); train.clip_with_previous_norm: true (each step clipped with the previous step's "
      "norm, a change of numerics) would update during the backward, predicted {:.4f} s a step "
      "({:.1f}% faster)",
      c.train.grad_clip, exact.prediction.optimizer_s, early.prediction.step_s, 100 * gain);
}

std::string describe_plan(const plan::Plan& p) {
  const exec::Schedule& s = p.schedule;
  std::string placements;
  std::map<std::string, int> counts;
  for (size_t b = 0; b < s.boundaries.size(); ++b) {
    const char* name = exec::placement_name(s.boundaries[b]);
    const int window = s.read_window(static_cast<int>(b));
    placements += fmt::format("{}{}:{}{}", b == 0 ? "" : " ", b, name,
                              window >= 0 ? fmt::format("@w{}", window) : "");
    ++counts[name];
  }
  std::string tally;
  for (const auto& [name, n] : counts)
    tally += fmt::format("{}{} {}", tally.empty() ? "" : ", ", n, name);
  std::string peaks;
  for (const auto& [space, bytes] : s.predicted_peak_bytes) {
    peaks += fmt::format("{}{} {:.3f} GB", peaks.empty() ? "" : ", ", space, bytes / 1e9);
  }
  // Note [Stages on the device]: 0 is the embedding, 1..L the blocks, L + 1 the head.
  const int L = static_cast<int>(s.boundaries.size()) - 1;
  std::string kept;
  for (int stage : s.stages_on_device)
    kept += fmt::format("{}{}", kept.empty() ? "" : ", ",
                        stage == 0   ? std::string("embed")
                        : stage <= L ? fmt::format("block {}", stage - 1)
                                     : std::string("head"));
  return fmt::format(
      "exec.schedule auto: batch {}, chunks of {} sequences; boundaries ({}): {}\n"
      "  stages kept and updated on the device: {}; blocks fused with the head: {}{}\n"
      "  predicted step {:.4f} s (compute {:.4f}, recompute {:.4f}, optimizer {:.4f}, the CPU "
      "updating {:.2f} G params/s{}); predicted peaks: {}; solved in {:.2f} s\n"
      "  stage times: {}",
      s.batch_size, s.chunk_sequences, tally, placements, kept.empty() ? "none" : kept,
      s.tail_blocks > 0 ? fmt::format("the last {}{}", s.tail_blocks, exec::tail_chunk_phrase(s))
                        : std::string("none"),
      p.search_stopped_at_limit ? " (the search for these stopped at the planner's time limit)"
                                : "",
      p.prediction.step_s, p.prediction.compute_s, p.prediction.recompute_s,
      p.prediction.optimizer_s, p.prediction.cpu_update_params_per_s / 1e9,
      p.prediction.cpu_update_in_run_scale != 1
          ? fmt::format(", {:.3f}x the profile's rate as a run measured",
                        p.prediction.cpu_update_in_run_scale)
          : std::string(),
      peaks, p.solve_s, p.stage_times_from);
}

}  // namespace lt::train
