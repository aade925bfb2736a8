#include "exec/forward_backward.h"

#include <algorithm>

#include "autograd/engine.h"
#include "ops/index_checks.h"
#include "ops/op_profile.h"

namespace lt::exec {

int64_t computed_tokens(const std::vector<data::Batch>& micro_batches, int64_t targets_over_ranks) {
  int64_t tokens = 0;
  for (const auto& mb : micro_batches)
    if (mb.target_count > 0 || targets_over_ranks > 0) tokens += mb.tokens;
  return tokens;
}

void forward_backward(const models::CausalLM& model, const std::vector<data::Batch>& micro_batches,
                      optim::GradNormPartials* norm, StepStats& stats, const BackwardHooks& hooks,
                      int64_t targets_over_ranks) {
  const Device device = model.device();
  int64_t targets = 0;
  for (const auto& mb : micro_batches) targets += mb.target_count;
  stats.tokens += computed_tokens(micro_batches, targets_over_ranks);
  stats.target_count += targets;
  const double denominator = static_cast<double>(
      std::max<int64_t>(targets_over_ranks > 0 ? targets_over_ranks : targets, 1));
  // Ids were checked against the vocabulary when the data was loaded and
  // targets counted on the host by the batcher. On a GPU the kernels guard
  // them again without a read-back: a bad one is thrown by the unfused
  // cross-entropy (which waits for its count anyway) or by the caller's
  // check after the step's one wait (below), before any update.
  ops::DeferIndexChecks deferred;
  // The gradient norm is taken as each gradient becomes final: in the
  // last backward (earlier micro-batches' gradients are still added to),
  // by the grad-ready hooks, so no separate pass reads every gradient.
  size_t last = micro_batches.size();
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    if (micro_batches[i].target_count > 0) last = i;
  }
  if (norm) norm->begin();
  struct Disarm {
    optim::GradNormPartials* partials;
    ~Disarm() {
      if (partials) partials->disarm();
    }
  } disarm_on_exit{norm};
  // Every micro-batch's ids and targets go to the device before any work
  // is queued: a copy to the device waits for its stream, so one made
  // between micro-batches would wait for the previous backward.
  std::vector<std::pair<Tensor, Tensor>> inputs(micro_batches.size());
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const data::Batch& mb = micro_batches[i];
    if (mb.target_count > 0) inputs[i] = {mb.ids.to(device), mb.targets.to(device)};
  }
  // On a GPU each micro-batch's loss stays there, in its slot, until every
  // backward is queued: one read-back a step, not one per micro-batch.
  const bool read_once = device.is_cuda();
  Tensor losses;
  int64_t losses_queued = 0;
  bool first = true;
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const data::Batch& mb = micro_batches[i];
    if (mb.target_count == 0) continue;
    Tensor loss = model.loss(inputs[i].first, inputs[i].second, denominator);
    if (read_once) {
      if (!losses.defined()) {
        losses = Tensor::empty({static_cast<int64_t>(micro_batches.size())}, loss.dtype(), device);
      }
      losses.slice(0, losses_queued, losses_queued + 1).copy_(loss.detach().reshape({1}));
      ++losses_queued;
    } else {
      stats.loss += loss.item();
    }
    inputs[i] = {};
    if (first && hooks.before_first_backward) hooks.before_first_backward();
    first = false;
    if (norm && i == last) norm->arm();
    if (i == last && hooks.before_last_backward) hooks.before_last_backward();
    backward(loss);
  }
  if (norm) {
    // The final sum of the per-gradient partials (and, on a GPU, its copy
    // to the host, which the wait below completes).
    ops::OpProfileScope profile("grad norm final sum", device);
    norm->finish();
  }
  if (!losses.defined()) return;
  // The step's one wait for the device: the losses come back after every
  // backward (and the norm's sum) is queued. Added in micro-batch order in
  // double, as the host did when it read each one.
  const std::vector<double> values = losses.to_doubles();
  for (int64_t i = 0; i < losses_queued; ++i) stats.loss += values[static_cast<size_t>(i)];
}

}  // namespace lt::exec
