#pragma once
// dist.share_weights: the ranks of one host keep one copy of the weights in
// shared memory (Note [Weights shared by the ranks of a host],
// exec/shared_weights.h), set up before the optimizer and executor.
#include <memory>

#include "exec/shared_weights.h"
#include "models/causal_lm.h"
#include "train/config.h"
#include "train/progress.h"
#include "train/run_plan.h"

namespace lt::train {

// On every rank of a run of several (a collective): the model's parameters
// moved into a segment the ranks of this host share, when the run uses
// ZeRO-1 (dist.zero 1) with a CPU-master executor, dist.share_weights is on
// and every rank is on one host with an MPI launch; null otherwise, saying
// why in `log` when sharing was asked for but cannot be. `groups`: ZeRO-1's
// groups (one per stage with parameters: streaming_zero_groups).
std::unique_ptr<exec::SharedWeights> share_weights_on_host(const TrainConfig& c,
                                                           const RunPlan& plan,
                                                           models::CausalLM& model, size_t groups,
                                                           ProgressBar& log);

}  // namespace lt::train
