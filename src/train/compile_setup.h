#pragma once
// train.compile: whether the run's blocks go through the fusion compiler
// (models/compiled_blocks.h), and the line the run logs about it.
#include "models/causal_lm.h"
#include "train/config.h"
#include "train/progress.h"
#include "train/run_plan.h"

namespace lt::train {

// With train.compile on, gives `model` its compiled blocks (kernels cached
// in compile::KernelCache::default_folder()) and says so; where the run
// cannot use them (no MLIR in this build, a GPU, an executor that calls
// the stages itself) says why once and leaves the model as it is.
void setup_compile(const TrainConfig& c, const RunPlan& plan, models::CausalLM& model,
                   ProgressBar& log);

// After a step: logs what compiling has done so far, once after the first
// step of the run (when the programs are built) and again at the end.
void log_compile(const models::CausalLM& model, ProgressBar& log);

}  // namespace lt::train
