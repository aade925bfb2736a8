#include "train/executor_auto.h"

#include <fmt/format.h>

#include "plan/executor_costs.h"
#include "train/schedule_auto.h"

namespace lt::train {

namespace {

// update_interval auto ends a window by gradient mass; the and
// DeepSpeed's examples use 4, which the prediction assumes.
constexpr int64_t kAssumedAutoWindow = 4;

}  // namespace

std::vector<ExecutorCandidate> whole_model_candidates(const TrainConfig& c,
                                                      const models::ModelConfig& model,
                                                      Device device, const ExecutorChoice& choice) {
  const bool stand_in = device.is_cpu();
  const exec::TrainSizes sizes = streaming_sizes(c, stand_in);
  const int64_t micro = c.train.batch_size / c.train.grad_accum;
  const plan::CostModel cost =
      plan::make_cost_model(model, auto_hardware(c), sizes, micro, /*max_recompute=*/8);
  const int64_t available = choice.available_bytes;
  const int64_t reserve = choice.gpu_free_memory ? kGpuReserveBytes : 0;
  auto fits = [&](int64_t bytes) { return available < 0 || bytes + reserve <= available; };
  auto describe = [](const plan::ExecutorTime& t) {
    return fmt::format("compute {:.3f} s + update {:.3f} s + copies {:.3f} s", t.compute_s,
                       t.optimizer_s, t.copies_s);
  };
  std::vector<ExecutorCandidate> out;
  {
    ExecutorCandidate r;
    r.executor = exec::ExecutorKind::Resident;
    r.gpu_bytes =
        choice.resident_bytes + (choice.resident_bytes * kResidentMarginPercent + 99) / 100;
    r.fits =
        fits(r.gpu_bytes) && (available < 0 || choice.executor == exec::ExecutorKind::Resident);
    const plan::ExecutorTime t = plan::predict_resident(cost);
    r.step_s = t.step_s;
    r.detail = describe(t);
    out.push_back(r);
  }
  const double topk = c.exec.zenflow.topk_ratio;
  const int64_t window =
      c.exec.zenflow.update_interval > 0 ? c.exec.zenflow.update_interval : kAssumedAutoWindow;
  for (exec::ExecutorKind kind : {exec::ExecutorKind::ZenFlow, exec::ExecutorKind::Offload}) {
    const bool zen = kind == exec::ExecutorKind::ZenFlow;
    ExecutorCandidate e;
    e.executor = kind;
    e.gpu_bytes = exec::offload_bytes_needed(model, sizes, micro, zen ? topk : 0.0)
                      .bytes(exec::MemorySpace::Gpu);
    e.fits = fits(e.gpu_bytes);
    const plan::ExecutorTime t =
        zen ? plan::predict_zenflow(cost, topk, window, c.exec.zenflow.update_interval > 0)
            : plan::predict_offload(cost);
    e.step_s = t.step_s;
    e.detail = describe(t) + (zen ? fmt::format(" (topk {}, window {})", topk, window) : "");
    // ZenFlow updates a column's Adam step late unless it is among the
    // top-k: a different training from AdamW's, for the memory it saves. A
    // tiny model, whose resident and ZenFlow steps were predicted equal to
    // the microsecond, ran ZenFlow on a GPU with room for everything.
    if (zen && out.front().fits) {
      e.eligible = false;
      e.detail += " (not taken: resident fits, and updates every column each step)";
    }
    // Their updates do not clip with the previous norm (run_plan.cpp).
    if (c.train.clip_with_previous_norm) {
      e.fits = false;
      e.detail += " (not with train.clip_with_previous_norm)";
    }
    out.push_back(e);
  }
  return out;
}

const ExecutorCandidate* fastest_fitting(const std::vector<ExecutorCandidate>& candidates) {
  const ExecutorCandidate* best = nullptr;
  for (const ExecutorCandidate& e : candidates) {
    if (e.fits && e.eligible && (!best || e.step_s < best->step_s)) best = &e;
  }
  return best;
}

namespace {

// Seconds in the unit that shows them: a tiny model's step is microseconds.
std::string step_time_text(double s) {
  if (s >= 0.1) return fmt::format("{:8.3f} s ", s);
  if (s >= 1e-4) return fmt::format("{:8.3f} ms", s * 1e3);
  return fmt::format("{:8.3f} us", s * 1e6);
}

}  // namespace

std::vector<std::string> candidate_table(const std::vector<ExecutorCandidate>& candidates,
                                         double streaming_step_s, bool on_the_cpu) {
  std::vector<std::string> lines = {
      on_the_cpu ? "exec.mode auto: predicted step per executor on the hardware profile's GPU "
                   "(this run is on the CPU, which chooses as that GPU would):"
                 : "exec.mode auto: predicted step per executor:"};
  for (const ExecutorCandidate& e : candidates) {
    lines.push_back(fmt::format("  {:<9} {}  {:<16} {}", exec::executor_name(e.executor),
                                step_time_text(e.step_s),
                                e.fits ? fmt::format("fits ({:.1f} GB)", e.gpu_bytes / 1e9)
                                       : fmt::format("needs {:.1f} GB", e.gpu_bytes / 1e9),
                                e.detail));
  }
  if (streaming_step_s > 0)
    lines.push_back(fmt::format("  {:<9} {}  {:<16} the planner's schedule", "streaming",
                                step_time_text(streaming_step_s), "fits"));
  return lines;
}

}  // namespace lt::train
