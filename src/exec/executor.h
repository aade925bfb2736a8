#pragma once
// An executor runs one optimizer step: forward and backward over the
// global batch (as micro-batches), the global gradient norm, clipping and
// the update. DESIGN.md, "Executors".
#include <vector>

#include "data/batching.h"
#include "exec/step_stats.h"

namespace lt::exec {

struct StepOptions {
  double lr = 0;             // learning rate for this step
  double max_grad_norm = 0;  // 0 = no clipping
};

class Executor {
 public:
  virtual ~Executor() = default;
  // `micro_batches` together form the global batch; the loss is the mean
  // over all their counted targets (not the mean of per-batch means).
  virtual StepStats step(const std::vector<data::Batch>& micro_batches,
                         const StepOptions& options) = 0;
  virtual const char* name() const = 0;
  // Waits for work a step left running (the streaming executor's pipelined
  // optimizer updates). Call it before reading parameters or optimizer
  // state: checkpoints, evaluation, the end of a run.
  virtual void sync() {}
};

}  // namespace lt::exec
