#pragma once
// Runs an executor over given batches the way the executor tests compare
// runs: the learning rate rises 10% a step (so a step that used the wrong
// rate shows), every step clips at `max_grad_norm`, and the masters are
// made whole (Executor::sync_masters) before the parameters are read.
#include <vector>

#include "data/batching.h"
#include "exec/executor.h"
#include "models/causal_lm.h"

namespace lt::testing {

struct ExecutorRun {
  std::vector<exec::StepStats> stats;
  std::vector<std::vector<float>> params;  // model.parameters() in order, after the run
};

inline ExecutorRun run_executor_steps(exec::Executor& executor, const models::CausalLM& model,
                                      const std::vector<std::vector<data::Batch>>& batches,
                                      double max_grad_norm) {
  ExecutorRun r;
  for (size_t s = 0; s < batches.size(); ++s) {
    exec::StepOptions o;
    o.lr = 3e-3 * (1.0 + 0.1 * static_cast<double>(s));
    o.max_grad_norm = max_grad_norm;
    r.stats.push_back(executor.step(batches[s], o));
  }
  executor.sync_masters();
  for (const auto& [name, p] : model.parameters()) r.params.push_back(p.to_vector<float>());
  return r;
}

}  // namespace lt::testing
