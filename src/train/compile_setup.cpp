#include "train/compile_setup.h"

#include "compile/compiler_info.h"
#include "core/error.h"
#include "models/compiled_blocks.h"
#include "train/hardware_cache.h"

namespace lt::train {

void setup_compile(const TrainConfig& c, const RunPlan& plan, models::CausalLM& model,
                   ProgressBar& log) {
  const std::string& mode = c.train.compile;
  if (mode == "off") return;
  // `on` asks for the compiler itself: without it, stop before training;
  // except on a GPU, whose kernels (cubins) load from the cache folder
  // without the plugin (the GPU machine has no MLIR; docs/compiler.md).
  // `auto` first asks whether this run could use it, so that a run that
  // cannot does not load the plugin (libMLIR and libLLVM) at all.
  if (mode == "on") {
    const compile::CompilerInfo compiler = compile::compiler_info();
    LT_CHECK(compiler.loaded || !plan.device.is_cpu(), "config key 'train.compile' is on, but ",
             "the fusion compiler is not available: ", compiler.error,
             ". Set train.compile to auto (or off) to train with the hand-written kernels.");
    if (!compiler.loaded) {
      log.message("train.compile on: no fusion compiler here (" + compiler.error +
                  "), so the GPU kernels must already be in the cache folder (" +
                  compile::KernelCache::default_folder() + ")");
    }
  }
  // auto on a GPU: every chain is timed both ways once on this machine
  // and runs compiled only where that is faster (autograd/chain_choice.h),
  // with kernels from MLIR or the cache folder; one that cannot be had runs
  // as calls.
  const bool chosen = !plan.device.is_cpu() && mode == "auto";
  if (mode == "auto" && !chosen) {
    const compile::CompilerInfo compiler = compile::compiler_info();
    if (!compiler.loaded) {
      log.message("train.compile auto: running the hand-written kernels: " + compiler.error);
      return;
    }
  }
  // Every executor runs the model's compiled blocks: resident and offload
  // (ZenFlow too) on their compute copies, which share them, streaming
  // stage by stage through CausalLM::run_stage.
  auto cache = std::make_shared<compile::KernelCache>(compile::KernelCache::default_folder());
  std::shared_ptr<autograd::ChainChooser> chooser;
  if (chosen)
    chooser =
        std::make_shared<autograd::ChainChooser>(*cache, gpu_machine_identity(plan.device.index));
  model.use_compiled_blocks(std::make_shared<models::CompiledBlocks>(cache, chooser));
  log.message("train.compile " + mode +
              ": blocks run through the fusion compiler (kernels cached in " + cache->folder() +
              ")" +
              (chosen ? "; each kind of chain runs compiled only where timed faster than its "
                        "calls on this GPU"
                      : ""));
}

void setup_compiled_optimizer(const TrainConfig& c, const models::CausalLM& model,
                              optim::Optimizer& optimizer, ProgressBar& log) {
  const auto& compiled = model.compiled_blocks();
  if (!compiled) return;
  // Measured (bench/optim_bench --compiled, bench/RESULTS.md): on the CPU
  // the compiled AdamW runs at 0.77-0.87 of the hand-written SIMD update
  // and the 8-bit one at 0.13-0.14 (its requantization's table lookups).
  // So auto keeps the hand-written ones; on runs the compiled ones, as
  // asked.
  if (c.train.compile != "on") {
    log.message(
        "train.compile auto: the optimizer runs its hand-written updates (the compiled ones are "
        "slower so far on the CPU: AdamW about 1.2x, 8-bit AdamW about 7x; bench/RESULTS.md); "
        "train.compile: on runs them");
    return;
  }
  if (optimizer.use_compiled_updates(compiled->cache())) {
    log.message(
        "train.compile on: the optimizer's updates run through the fusion compiler (slower "
        "than its hand-written ones so far; bench/RESULTS.md)");
  } else {
    log.message("train.compile on: the optimizer has no compiled updates; it runs its own kernels");
  }
}

void log_compile(const models::CausalLM& model, const optim::Optimizer& optimizer,
                 ProgressBar& log) {
  const auto& compiled = model.compiled_blocks();
  if (!compiled) return;
  std::string line = models::compile_summary(compiled->stats(), compiled->cache_stats(),
                                             compiled->chooser().get());
  if (optimizer.compiled_updates() > 0) {
    line += "; " + std::to_string(optimizer.compiled_updates()) +
            " parameter updates by compiled optimizer kernels";
  }
  const std::string fallback = optimizer.compiled_fallback();
  if (!fallback.empty()) line += "; the optimizer runs its hand-written kernels: " + fallback;
  log.message(line);
}

}  // namespace lt::train
