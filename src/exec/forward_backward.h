#pragma once
// One step's forward and backward over the micro-batches of a global
// batch, as every executor that runs the whole model at once does it (the
// resident and offload executors): gradients accumulate into the model's
// parameters' .grad, each micro-batch's loss divided by the global count of
// targets, so the sum is the gradient of the mean over the whole batch.
#include <functional>
#include <vector>

#include "data/batching.h"
#include "exec/step_stats.h"
#include "models/causal_lm.h"
#include "optim/grad_norm_partials.h"

namespace lt::exec {

// Adds the batch's tokens, targets and loss to `stats`. `norm` (may be
// null) is begun, armed for the last backward that counts (when every
// gradient becomes final) and finished: its squared_sum() is then the
// gradients' norm, once the device's work is done. Device ids are checked
// by the kernels; the caller calls ops::check_index_errors after waiting.
// What an executor runs between the passes (each may be empty):
// `before_first_backward` once a step's first micro-batch that counts has
// run its forward, `before_last_backward` right before the backward that
// makes every gradient final.
struct BackwardHooks {
  std::function<void()> before_first_backward;
  std::function<void()> before_last_backward;
};

// The real tokens of the micro-batches a step computes, for its tokens/s:
// only those with a counted target, since the others are skipped (no
// forward, no backward); a step without one computes nothing, and counting
// its tokens over its near-zero seconds made millions of tokens/s.
// `targets_over_ranks` > 0 (data parallel): every shard counts, as rank 0's
// shard carries the whole batch's tokens (dist/shard.h) whether or not its
// own rows have targets.
int64_t computed_tokens(const std::vector<data::Batch>& micro_batches, int64_t targets_over_ranks);

// `targets_over_ranks` (data parallel, exec/cross_rank_sum.h): the global
// batch's target count over every rank's shard, the loss's denominator, so
// that the ranks' gradients and losses add up to the global batch's; 0: the
// micro-batches' own count.
void forward_backward(const models::CausalLM& model, const std::vector<data::Batch>& micro_batches,
                      optim::GradNormPartials* norm, StepStats& stats,
                      const BackwardHooks& hooks = {}, int64_t targets_over_ranks = 0);

}  // namespace lt::exec
