#pragma once
// train.compile: whether the run's blocks go through the fusion compiler
// (models/compiled_blocks.h), and the line the run logs about it.
#include "models/causal_lm.h"
#include "optim/optimizer.h"
#include "train/config.h"
#include "train/progress.h"
#include "train/run_plan.h"

namespace lt::train {

// With train.compile on or auto, gives `model` its compiled blocks
// (kernels cached in compile::KernelCache::default_folder()) and says so;
// every executor runs them. Where the run does not use them (auto on a
// GPU; with auto, no compiler plugin: built without MLIR, or it or its
// libraries missing) says why once and leaves the model as it is. With on
// and no compiler plugin, throws naming train.compile and the reason on
// the CPU; on a GPU says that the kernels must be in the cache folder.
void setup_compile(const TrainConfig& c, const RunPlan& plan, models::CausalLM& model,
                   ProgressBar& log);

// After setup_compile gave `model` its compiled blocks, with train.compile
// on: `optimizer`'s updates run as compiled kernels from the same cache
// too, and the run says so (or that this optimizer has none); auto keeps
// the hand-written updates, which are faster, and says so. A kernel that
// cannot be had later (on a GPU without the compiler: not in the cache
// folder) puts the optimizer back on its hand-written kernels, which
// log_compile reports. Without compiled blocks, does nothing.
void setup_compiled_optimizer(const TrainConfig& c, const models::CausalLM& model,
                              optim::Optimizer& optimizer, ProgressBar& log);

// Logs what compiling has done so far: the trainer calls it after the
// run's second step (the first traces and compiles the forward, the second
// compiles the backward) and at the end.
void log_compile(const models::CausalLM& model, const optim::Optimizer& optimizer,
                 ProgressBar& log);

}  // namespace lt::train
