#include "exec/resident.h"

#include <chrono>
#include <cmath>

#include "autograd/engine.h"
#include "optim/clip.h"

namespace lt::exec {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

ResidentExecutor::ResidentExecutor(const models::CausalLM& model, optim::Optimizer& optimizer)
    : model_(model), optimizer_(optimizer), params_(model.parameters()) {}

StepStats ResidentExecutor::step(const std::vector<data::Batch>& micro_batches,
                                 const StepOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  cpu_allocator().reset_peak();
  StepStats stats;
  for (const auto& mb : micro_batches) {
    stats.tokens += mb.tokens;
    stats.target_count += mb.target_count;
  }
  for (auto& [name, p] : params_) p.set_grad(Tensor());
  // Each micro-batch's loss is divided by the global target count, so the
  // accumulated gradient is that of the mean over the whole global batch.
  const double denominator = static_cast<double>(std::max<int64_t>(stats.target_count, 1));
  for (const auto& mb : micro_batches) {
    if (mb.target_count == 0) continue;
    Tensor loss = model_.loss(mb.ids, mb.targets, denominator);
    stats.loss += loss.item();
    backward(loss);
  }
  stats.compute_s = seconds_since(start);

  const auto opt_start = std::chrono::steady_clock::now();
  stats.grad_norm = optim::global_grad_norm(params_);
  if (!std::isfinite(stats.loss) || !std::isfinite(stats.grad_norm)) {
    stats.skipped = true;
  } else if (stats.target_count > 0) {
    optimizer_.step(options.lr, optim::clip_scale(stats.grad_norm, options.max_grad_norm));
  }
  for (auto& [name, p] : params_) p.set_grad(Tensor());  // free gradients between steps
  stats.optimizer_s = seconds_since(opt_start);
  stats.seconds = seconds_since(start);
  stats.peak_bytes["host"] = cpu_allocator().stats().peak_bytes;
  return stats;
}

}  // namespace lt::exec
