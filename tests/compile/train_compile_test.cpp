// train.compile on model fixtures: training with the blocks run through
// the fusion compiler (models/compiled_blocks.h) gives the losses and the
// parameters of training without it, step by step, in f32 (resident
// executor, AdamW, clipping on). The compiled run must actually fuse:
// every block builds a program, and a second run in the same process
// compiles no kernel (the cache).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "compile/compiler_info.h"
#include "exec/resident.h"
#include "models/compiled_blocks.h"
#include "support/executor_steps.h"
#include "support/fixture_models.h"
#include "support/random_batch.h"
#include "train/train_helpers.h"

namespace lt {
namespace {

struct TrainRun {
  testing::ExecutorRun result;
  models::CompiledBlockStats stats;
  compile::KernelCacheStats cache;
};

TrainRun train(const std::string& family, const std::shared_ptr<compile::KernelCache>& cache,
               int steps, DType compute = DType::F32) {
  models::CausalLM model = testing::random_fixture_model(family, 2);
  std::shared_ptr<models::CompiledBlocks> compiled;
  if (cache) {
    compiled = std::make_shared<models::CompiledBlocks>(cache);
    model.use_compiled_blocks(compiled);
  }
  auto optimizer = testing::test_optimizer(model, testing::TestOptimizer::AdamW);
  exec::ResidentExecutor executor(model, *optimizer, compute);
  Generator gen(17);
  std::vector<std::vector<data::Batch>> batches;
  for (int s = 0; s < steps; ++s) {
    batches.push_back({testing::random_token_batch(gen, 2, 12, model.config().vocab_size),
                       testing::random_token_batch(gen, 2, 12, model.config().vocab_size)});
  }
  TrainRun r;
  r.result = testing::run_executor_steps(executor, model, batches, 1.0);
  if (compiled) r.stats = compiled->stats();
  if (cache) r.cache = cache->stats();
  return r;
}

class TrainCompile : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!compile::compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  }
};

// Tolerance: the fused kernels round in another order than the ops (f32
// row sums instead of double, the backward recomputing the forward), a few
// f32 ulps per value; over 4 steps of AdamW at lr 3e-3 that stays under
// 1e-5 of the loss and 1e-4 absolute on a parameter.
TEST_P(TrainCompile, GivesTheLossesOfAnUnfusedRun) {
  const int steps = 4;
  const TrainRun plain = train(GetParam(), nullptr, steps);
  auto cache = std::make_shared<compile::KernelCache>();
  const TrainRun fused = train(GetParam(), cache, steps);
  ASSERT_EQ(fused.result.stats.size(), plain.result.stats.size());
  for (size_t s = 0; s < plain.result.stats.size(); ++s) {
    const double a = fused.result.stats[s].loss, b = plain.result.stats[s].loss;
    EXPECT_NEAR(a, b, 1e-5 * std::abs(b)) << "step " << s;
  }
  for (size_t i = 0; i < plain.result.params.size(); ++i) {
    for (size_t e = 0; e < plain.result.params[i].size(); ++e) {
      ASSERT_NEAR(fused.result.params[i][e], plain.result.params[i][e], 1e-4)
          << "parameter " << i << " element " << e;
    }
  }
  // Two blocks, each traced once (the micro-batches share a shape).
  EXPECT_EQ(fused.stats.programs, 2) << fused.stats.first_fallback;
  EXPECT_EQ(fused.stats.fallbacks, 0) << fused.stats.first_fallback;
  EXPECT_GE(fused.stats.chains, 2 * 3);
  EXPECT_GT(fused.cache.compiled, 0);

  // The same model again in this process: every kernel from the cache.
  const TrainRun again = train(GetParam(), cache, 1);
  EXPECT_EQ(again.cache.compiled, fused.cache.compiled);
  EXPECT_EQ(again.result.stats[0].loss, fused.result.stats[0].loss);
}

// bf16 compute (as on a GPU): the resident executor runs a bf16 copy of
// the model, and its blocks must be the compiled ones. Both runs round
// each call to bf16, in other orders: losses within 1e-2 relative.
TEST_P(TrainCompile, Bf16ComputeCopyRunsTheCompiledBlocks) {
  const int steps = 2;
  const TrainRun plain = train(GetParam(), nullptr, steps, DType::BF16);
  const TrainRun fused =
      train(GetParam(), std::make_shared<compile::KernelCache>(), steps, DType::BF16);
  EXPECT_EQ(fused.stats.programs, 2) << fused.stats.first_fallback;
  EXPECT_EQ(fused.stats.fallbacks, 0) << fused.stats.first_fallback;
  for (size_t s = 0; s < plain.result.stats.size(); ++s) {
    const double a = fused.result.stats[s].loss, b = plain.result.stats[s].loss;
    EXPECT_NEAR(a, b, 1e-2 * std::abs(b)) << "step " << s;
  }
}

// block_kernel_graphs, which fills a cache folder ahead for a GPU machine
// without MLIR, lists exactly the kernels a training run compiles, in f32
// and with bf16 compute (a GPU run's): after 2 steps (the second compiles
// the backward) into a folder, the listed graphs all load from it (none
// missing) and the folder holds no entry they do not name (none extra).
TEST_P(TrainCompile, BlockKernelGraphsAreTheKernelsTrainingCompiles) {
  for (DType compute : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(compute));
    train::testing::TempDir dir("block_kernel_graphs_" + GetParam());
    const TrainRun fused =
        train(GetParam(), std::make_shared<compile::KernelCache>(dir.path().string()), 2, compute);
    EXPECT_EQ(fused.stats.fallbacks, 0) << fused.stats.first_fallback;
    size_t entries = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      entries += e.path().extension() == ".kernel" ? 1 : 0;
    }
    const models::ModelConfig config = testing::random_fixture_model(GetParam(), 1).config();
    compile::KernelCache ahead(dir.path().string());
    std::set<std::string> keys;
    for (const compile::KernelGraph& g : models::block_kernel_graphs(config, compute)) {
      keys.insert(g.key());
      ahead.get(g);
    }
    EXPECT_EQ(ahead.stats().compiled, 0) << "listed kernels that training did not compile";
    EXPECT_EQ(keys.size(), entries) << "training compiled kernels that are not listed";
    EXPECT_EQ(ahead.stats().loaded_from_disk, static_cast<int64_t>(keys.size()));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TrainCompile, ::testing::Values("llama", "gpt2"));

}  // namespace
}  // namespace lt
