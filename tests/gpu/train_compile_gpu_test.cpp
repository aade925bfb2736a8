// train.compile on a GPU (issue 24): the model fixtures trained by the
// resident executor in bf16 on CUDA with their blocks run through the
// fusion compiler (the chains as cubins) against the reference, the CPU
// f32 run of the same batches (itself checked against transformers and
// float64 in tests/train and tests/exec), within the bf16 tolerances of
// ResidentGpuFixture.Bf16StepsMatchCpuF32 (tests/gpu/resident_gpu_test.cpp:
// losses 1e-2, gradient norms 3e-2, masters 0.35 of how far they moved);
// and against the same GPU run unfused, within the same bounds (both
// round to bf16, in other orders). The compiled run must fuse: every block
// builds its programs, none falls back, and the kernels come from the
// folder (the GPU machine cannot compile them: GpuKernelPrebuild.* fills
// $LT_GPU_KERNELS where MLIR is, from models::block_kernel_graphs).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "bf16_reference.h"
#include "compile/kernel_cache.h"
#include "io/hf_model.h"
#include "support/gpu_kernel_cases.h"

namespace lt::exec {
namespace {

using namespace gpu_test;

class TrainCompileGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainCompileGpu, Bf16LossesMatchCpuF32AndTheUnfusedRun) {
  LT_REQUIRE_GPU();
  const auto batches = gpu_test::make_batches(4, 16, 97, 5, 1);
  const auto model = [&] { return io::load_hf_model(fixture(GetParam())); };
  const TrainRun cpu = train_resident(model(), Device::cpu(), DType::F32, batches);
  const TrainRun plain = train_resident(model(), Device::cuda(0), DType::BF16, batches);
  auto cache = std::make_shared<compile::KernelCache>(compile::testing::gpu_test_kernel_folder());
  auto compiled = std::make_shared<models::CompiledBlocks>(cache);
  const TrainRun fused = train_resident(model(), Device::cuda(0), DType::BF16, batches, compiled);

  compare_runs(fused, cpu, 1e-2, 3e-2, 0.35, GetParam() + " compiled bf16 against cpu f32");
  compare_runs(fused, plain, 1e-2, 3e-2, 0.35, GetParam() + " compiled against unfused bf16");
  const models::CompiledBlockStats stats = compiled->stats();
  std::printf("%s: %s\n", GetParam().c_str(),
              models::compile_summary(stats, compiled->cache_stats()).c_str());
  // Two micro-batch shapes (16 and 13 tokens) per block, with gradients.
  const int64_t blocks = model().config().num_hidden_layers;
  EXPECT_EQ(stats.programs, 2 * blocks) << stats.first_fallback;
  EXPECT_EQ(stats.fallbacks, 0) << stats.first_fallback;
  EXPECT_GE(stats.chains, 2 * blocks * 3);
}

// train.compile auto's choice (autograd/chain_choice.h): each kind of
// chain timed both ways on this GPU, and the faster runs; the run still
// gives the reference's losses, whichever ran, and no block falls back.
TEST_P(TrainCompileGpu, ChainsChosenByTimeMatchCpuF32) {
  LT_REQUIRE_GPU();
  const auto batches = gpu_test::make_batches(4, 16, 97, 5, 1);
  const auto model = [&] { return io::load_hf_model(fixture(GetParam())); };
  const TrainRun cpu = train_resident(model(), Device::cpu(), DType::F32, batches);
  auto cache = std::make_shared<compile::KernelCache>(compile::testing::gpu_test_kernel_folder());
  // A machine name of this run's own, so that the choices are timed here,
  // not read from an earlier run's entries in the shared folder.
  const std::string machine =
      "TrainCompileGpu " + GetParam() + " " +
      std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  auto chooser = std::make_shared<autograd::ChainChooser>(*cache, machine);
  auto compiled = std::make_shared<models::CompiledBlocks>(cache, chooser);
  const TrainRun chosen = train_resident(model(), Device::cuda(0), DType::BF16, batches, compiled);

  compare_runs(chosen, cpu, 1e-2, 3e-2, 0.35, GetParam() + " chosen chains bf16 against cpu f32");
  const models::CompiledBlockStats stats = compiled->stats();
  std::printf("%s: %s\n", GetParam().c_str(),
              models::compile_summary(stats, compiled->cache_stats(), chooser.get()).c_str());
  const autograd::ChainChoiceStats choice = chooser->stats();
  EXPECT_TRUE(choice.first_failure.empty()) << choice.first_failure;
  EXPECT_GT(choice.measured, 0);
  EXPECT_EQ(choice.from_disk, 0);
  EXPECT_GT(choice.compiled + choice.as_calls, 0);
  EXPECT_EQ(stats.programs, 2 * model().config().num_hidden_layers) << stats.first_fallback;
  EXPECT_EQ(stats.fallbacks, 0) << stats.first_fallback;
}

INSTANTIATE_TEST_SUITE_P(Families, TrainCompileGpu,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gpt2"));

}  // namespace
}  // namespace lt::exec
