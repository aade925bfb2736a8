// train.compile's optimizer updates on a GPU (issue 24): the resident
// executor in bf16 on CUDA, masters and optimizer on the device, blocks and
// AdamW / 8-bit AdamW updates compiled (cubins from $LT_GPU_KERNELS, which
// GpuKernelPrebuild.* fills where MLIR is: its named cases hold AdamW's
// and 8-bit AdamW's kernels with a bf16 copy), against the same run with
// the hand-written CUDA kernels, within the bf16 bounds of
// TrainCompileGpu (losses 1e-2, gradient norms 3e-2, masters 0.35 of how
// far they moved). Every parameter has a gradient every step, so the
// compiled updates number steps * parameters (a hand count).
#include <gtest/gtest.h>

#include "bf16_reference.h"
#include "compile/compiler_info.h"
#include "compile/kernel_cache.h"
#include "io/hf_model.h"
#include "support/fixture_models.h"
#include "support/gpu_kernel_cases.h"
#include "train/train_helpers.h"

namespace lt::exec {
namespace {

using namespace gpu_test;

struct OptimizerRun {
  TrainRun run;
  int64_t compiled_updates = 0;
  size_t parameters = 0;
};

OptimizerRun train(const std::string& family, lt::testing::TestOptimizer kind, bool compiled,
                   const std::vector<std::vector<data::Batch>>& batches) {
  models::CausalLM model = io::load_hf_model(fixture(family));
  model.to(Device::cuda(0), DType::F32);
  auto cache = std::make_shared<compile::KernelCache>(compile::testing::gpu_test_kernel_folder());
  if (compiled) model.use_compiled_blocks(std::make_shared<models::CompiledBlocks>(cache));
  auto optimizer = lt::testing::test_optimizer(model, kind);
  if (compiled) {
    EXPECT_TRUE(optimizer->use_compiled_updates(cache));
  }
  ResidentExecutor executor(model, *optimizer, DType::BF16);
  OptimizerRun r;
  r.run.initial = host_values(model);
  for (const auto& b : batches) r.run.stats.push_back(executor.step(b, step_options()));
  r.run.params = host_values(model);
  r.compiled_updates = optimizer->compiled_updates();
  r.parameters = model.parameters().size();
  return r;
}

class TrainCompileOptimizerGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainCompileOptimizerGpu, Bf16LossesMatchTheHandWrittenKernels) {
  LT_REQUIRE_GPU();
  const int steps = 4;
  const auto batches = make_batches(steps, 16, 97, 5, 1);
  for (auto kind : {lt::testing::TestOptimizer::AdamW, lt::testing::TestOptimizer::AdamW8bit}) {
    const std::string label =
        GetParam() + (kind == lt::testing::TestOptimizer::AdamW ? " adamw" : " adamw8bit");
    SCOPED_TRACE(label);
    const OptimizerRun plain = train(GetParam(), kind, false, batches);
    const OptimizerRun fused = train(GetParam(), kind, true, batches);
    compare_runs(fused.run, plain.run, 1e-2, 3e-2, 0.35, label + " compiled against hand-written");
    EXPECT_EQ(fused.compiled_updates, static_cast<int64_t>(steps * fused.parameters));
  }
}

// A GPU machine without the compiler whose cache folder lacks the
// optimizer's kernels: the update finds out before it changes anything,
// runs the hand-written kernels (the same values bit for bit, as no
// compiled update ran) from then on, and says why.
TEST(TrainCompileOptimizerGpuFallback, MissingKernelsRunTheHandWrittenUpdate) {
  LT_REQUIRE_GPU();
  if (compile::compiler_info().loaded) GTEST_SKIP() << "the compiler here builds any kernel";
  const train::testing::TempDir empty("optimizer_kernels_missing");
  for (auto kind : {lt::testing::TestOptimizer::AdamW, lt::testing::TestOptimizer::AdamW8bit}) {
    std::vector<std::vector<double>> params[2];
    for (bool compiled : {false, true}) {
      models::CausalLM model = io::load_hf_model(fixture("llama"));
      model.to(Device::cuda(0), DType::F32);
      for (auto& [name, p] : model.parameters()) p.set_grad(p.detach().clone());
      auto optimizer = lt::testing::test_optimizer(model, kind);
      if (compiled) {
        optimizer->use_compiled_updates(
            std::make_shared<compile::KernelCache>(empty.path().string()));
      }
      optimizer->step(1e-2, 0.5);
      optimizer->step(1e-2, 0.5);
      EXPECT_EQ(optimizer->compiled_updates(), 0);
      EXPECT_EQ(optimizer->compiled_fallback().empty(), !compiled)
          << optimizer->compiled_fallback();
      params[compiled] = host_values(model);
    }
    EXPECT_EQ(params[0], params[1]);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TrainCompileOptimizerGpu, ::testing::Values("llama", "gpt2"));

}  // namespace
}  // namespace lt::exec
