#include "train/compile_setup.h"

#include "compile/compiler_info.h"
#include "models/compiled_blocks.h"

namespace lt::train {

void setup_compile(const TrainConfig& c, const RunPlan& plan, models::CausalLM& model,
                   ProgressBar& log) {
  if (!c.train.compile) return;
  const char* why_not = nullptr;
  if (!compile::compiler_info().built_in) {
    why_not = "this build has no MLIR (LT_MLIR, scripts/install-deps.sh)";
  } else if (!plan.device.is_cpu()) {
    why_not = "the compiled kernels run on the CPU only so far (the GPU path does not launch yet)";
  } else if (plan.executor != exec::ExecutorKind::Resident &&
             plan.executor != exec::ExecutorKind::Offload) {
    why_not = "only the resident and offload executors run the compiled blocks so far";
  }
  if (why_not != nullptr) {
    log.message(std::string("train.compile: running unfused: ") + why_not);
    return;
  }
  auto cache = std::make_shared<compile::KernelCache>(compile::KernelCache::default_folder());
  model.use_compiled_blocks(std::make_shared<models::CompiledBlocks>(cache));
  log.message("train.compile: blocks run through the fusion compiler (kernels cached in " +
              cache->folder() + ")");
}

void log_compile(const models::CausalLM& model, ProgressBar& log) {
  const auto& compiled = model.compiled_blocks();
  if (compiled) log.message(models::compile_summary(compiled->stats(), compiled->cache_stats()));
}

}  // namespace lt::train
