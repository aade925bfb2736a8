#include "exec/forward_backward.h"

#include <algorithm>

#include "autograd/engine.h"
#include "ops/index_checks.h"
#include "ops/op_profile.h"

namespace lt::exec {

void forward_backward(const models::CausalLM& model, const std::vector<data::Batch>& micro_batches,
                      optim::GradNormPartials* norm, StepStats& stats, const BackwardHooks& hooks,
                      int64_t targets_over_ranks) {
  const Device device = model.device();
  int64_t targets = 0;
  for (const auto& mb : micro_batches) {
    stats.tokens += mb.tokens;
    targets += mb.target_count;
  }
  stats.target_count += targets;
  const double denominator = static_cast<double>(
      std::max<int64_t>(targets_over_ranks > 0 ? targets_over_ranks : targets, 1));
  // Ids were checked against the vocabulary when the data was loaded and
  // targets counted on the host by the batcher. On a GPU the kernels guard
  // them again without a read-back: a bad one is thrown by the
  // cross-entropy (which waits for its count anyway) or by the caller's
  // check after its wait, before any update.
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
  bool first = true;
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const data::Batch& mb = micro_batches[i];
    if (mb.target_count == 0) continue;
    Tensor loss = model.loss(mb.ids.to(device), mb.targets.to(device), denominator);
    stats.loss += loss.item();
    if (first && hooks.before_first_backward) hooks.before_first_backward();
    first = false;
    if (norm && i == last) norm->arm();
    if (i == last && hooks.before_last_backward) hooks.before_last_backward();
    backward(loss);
  }
  if (!norm) return;
  // The final sum of the per-gradient partials (and, on a GPU, its copy to
  // the host, which the caller's wait completes).
  ops::OpProfileScope profile("grad norm final sum", device);
  norm->finish();
}

}  // namespace lt::exec
