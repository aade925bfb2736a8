#pragma once
// The resident executor: the whole model on one device, plain autograd
// through the whole stage chain. It is the reference every other executor
// is checked against, and the fast path when the model fits.
#include "exec/executor.h"
#include "models/causal_lm.h"
#include "optim/optimizer.h"

namespace lt::exec {

class ResidentExecutor final : public Executor {
 public:
  ResidentExecutor(const models::CausalLM& model, optim::Optimizer& optimizer);
  StepStats step(const std::vector<data::Batch>& micro_batches,
                 const StepOptions& options) override;
  const char* name() const override { return "resident"; }

 private:
  const models::CausalLM& model_;
  optim::Optimizer& optimizer_;
  nn::NamedParameters params_;
};

}  // namespace lt::exec
