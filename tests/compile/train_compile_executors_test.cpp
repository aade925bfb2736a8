// train.compile under the executors that do not run the model as a whole
// on its own: the offload executor (and ZenFlow, the same executor) computes
// on a device copy of the model, the streaming executor runs the stages
// itself. With the model's blocks compiled (models/compiled_blocks.h),
// training on the CPU stand-in device gives the losses and parameters of
// the same executor without them, in f32, and the blocks were actually run
// as programs (compiled kernels, no fallback): an executor that ran its own
// unfused copies would leave the programs at zero. The head's loss runs its
// softmax cross-entropy through the same cache (its kernels are there
// after training).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "compile/compiler_info.h"
#include "compile/cross_entropy_chain.h"
#include "exec/offload.h"
#include "exec/stand_in_device.h"
#include "exec/streaming.h"
#include "models/compiled_blocks.h"
#include "support/executor_steps.h"
#include "support/fixture_models.h"
#include "support/random_batch.h"
#include "train/train_helpers.h"

namespace lt {
namespace {

enum class Mode { Offload, ZenFlow, Streaming };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Offload:
      return "offload";
    case Mode::ZenFlow:
      return "zenflow";
    case Mode::Streaming:
      return "streaming";
  }
  return "?";
}

constexpr int kLayers = 2;
constexpr int kSteps = 5;

std::unique_ptr<exec::Executor> make_executor(Mode mode, const models::CausalLM& model,
                                              optim::Optimizer& optimizer) {
  auto device = std::make_unique<exec::StandInDevice>();
  if (mode == Mode::Streaming) {
    return std::make_unique<exec::StreamingExecutor>(model, optimizer, std::move(device),
                                                     exec::StreamingOptions{});
  }
  exec::OffloadOptions o;
  o.adam.lr = 3e-3;  // testing::test_optimizer's
  o.adam.weight_decay = 0.01;
  o.no_decay = {"norm"};
  if (mode == Mode::ZenFlow) {
    // ZenFlow proper: a quarter of the columns on the device, the CPU's
    // updates a window of two steps late.
    o.zenflow = true;
    o.zenflow_options.topk_ratio = 0.25;
    o.zenflow_options.update_interval = 2;
    o.zenflow_options.select_strategy = exec::SelectStrategy::Step;
    o.zenflow_options.select_interval = 4;
  }
  return std::make_unique<exec::OffloadExecutor>(model, optimizer, std::move(device), o);
}

struct ModeRun {
  testing::ExecutorRun result;
  models::CompiledBlockStats stats;
  compile::KernelCacheStats cache;
  std::shared_ptr<compile::KernelCache> kernels;
};

// Whether the head's cross-entropy kernels (f32) are in `cache` already.
bool has_cross_entropy_kernels(compile::KernelCache& cache) {
  const int64_t compiled = cache.stats().compiled;
  cache.get(compile::cross_entropy_forward_graph(DType::F32));
  cache.get(compile::cross_entropy_backward_graph(DType::F32));
  return cache.stats().compiled == compiled;
}

ModeRun train(Mode mode, const std::string& family, bool compiled,
              const std::string& cache_folder = "") {
  models::CausalLM model = testing::random_fixture_model(family, kLayers);
  std::shared_ptr<models::CompiledBlocks> blocks;
  auto cache = std::make_shared<compile::KernelCache>(cache_folder);
  if (compiled) {
    blocks = std::make_shared<models::CompiledBlocks>(cache);
    model.use_compiled_blocks(blocks);
  }
  auto optimizer = testing::test_optimizer(model, testing::TestOptimizer::AdamW);
  std::unique_ptr<exec::Executor> executor = make_executor(mode, model, *optimizer);
  Generator gen(17);
  const auto batches = testing::random_token_steps(gen, kSteps, 12, model.config().vocab_size);
  ModeRun r;
  r.result = testing::run_executor_steps(*executor, model, batches, 1.0);
  executor.reset();  // its threads are done with the blocks
  if (blocks) r.stats = blocks->stats();
  r.cache = cache->stats();
  r.kernels = cache;
  return r;
}

class TrainCompileExecutors : public ::testing::TestWithParam<std::tuple<Mode, std::string>> {
 protected:
  void SetUp() override {
    if (!compile::compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  }
};

// Tolerance as in train_compile_test.cpp (a few f32 ulps a value from the
// fused kernels' order, over 5 steps of AdamW at lr 3e-3).
TEST_P(TrainCompileExecutors, GiveTheLossesOfTheUnfusedRunAndCompileTheBlocks) {
  const auto& [mode, family] = GetParam();
  const ModeRun plain = train(mode, family, false);
  const ModeRun fused = train(mode, family, true);
  ASSERT_EQ(fused.result.stats.size(), plain.result.stats.size());
  for (size_t s = 0; s < plain.result.stats.size(); ++s) {
    const double a = fused.result.stats[s].loss, b = plain.result.stats[s].loss;
    EXPECT_NEAR(a, b, 1e-5 * std::abs(b)) << "step " << s;
  }
  EXPECT_NE(plain.result.stats.front().loss, plain.result.stats.back().loss);
  for (size_t i = 0; i < plain.result.params.size(); ++i) {
    for (size_t e = 0; e < plain.result.params[i].size(); ++e) {
      ASSERT_NEAR(fused.result.params[i][e], plain.result.params[i][e], 1e-4)
          << "parameter " << i << " element " << e;
    }
  }
  // Every block traced once per grad mode it runs in: with gradients
  // (offload's one forward; streaming's recompute before a backward) and,
  // streaming only, without (its forward pass, which keeps boundaries).
  const int64_t modes = mode == Mode::Streaming ? 2 : 1;
  EXPECT_EQ(fused.stats.programs, kLayers * modes) << fused.stats.first_fallback;
  EXPECT_EQ(fused.stats.fallbacks, 0) << fused.stats.first_fallback;
  EXPECT_GE(fused.stats.chains, kLayers * modes * 3);
  EXPECT_GT(fused.cache.compiled, 0);
  EXPECT_EQ(plain.cache.compiled, 0);
  EXPECT_TRUE(has_cross_entropy_kernels(*fused.kernels)) << "the loss's cross-entropy ran unfused";
}

// A GPU machine without MLIR runs only the kernels prebuilt for it from
// models::block_kernel_graphs (traced with gradients, as resident and
// offload run the blocks). Streaming also runs each block without
// gradients: the kernels it compiles into a folder must all be listed, or
// its forward blocks would run unfused there.
TEST_P(TrainCompileExecutors, BlockKernelGraphsListEveryKernelTheExecutorCompiles) {
  const auto& [mode, family] = GetParam();
  train::testing::TempDir dir("executor_kernels_" + std::string(mode_name(mode)) + "_" + family);
  const ModeRun fused = train(mode, family, true, dir.path().string());
  EXPECT_EQ(fused.stats.fallbacks, 0) << fused.stats.first_fallback;
  std::set<std::string> listed;
  const models::ModelConfig config = testing::random_fixture_model(family, 1).config();
  compile::KernelCache ahead(dir.path().string());
  for (const compile::KernelGraph& g : models::block_kernel_graphs(config, DType::F32)) {
    listed.insert(g.key());
    ahead.get(g);
  }
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    entries += e.path().extension() == ".kernel" ? 1 : 0;
  }
  EXPECT_EQ(ahead.stats().compiled, 0) << "listed kernels that training did not compile";
  EXPECT_EQ(listed.size(), entries) << "training compiled kernels that are not listed";
}

INSTANTIATE_TEST_SUITE_P(Modes, TrainCompileExecutors,
                         ::testing::Combine(::testing::Values(Mode::Offload, Mode::ZenFlow,
                                                              Mode::Streaming),
                                            ::testing::Values("llama", "gpt2")),
                         [](const auto& info) {
                           return std::string(mode_name(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace lt
