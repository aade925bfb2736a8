// train.compile's optimizer updates (Optimizer::use_compiled_updates):
// AdamW's and AdamW8bit's updates as kernels of the fusion compiler
// (optim/compiled_adamw.h, compiled_adamw8bit.h) inside training, against
// the hand-written kernels. Every parameter has a gradient every step, so
// a run of `steps` steps compiles-updates steps * parameters (a hand
// count that an optimizer quietly running its own kernels fails).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "compile/compiler_info.h"
#include "exec/resident.h"
#include "exec/stand_in_device.h"
#include "exec/streaming.h"
#include "models/compiled_blocks.h"
#include "support/executor_steps.h"
#include "support/fixture_models.h"
#include "support/random_batch.h"

namespace lt {
namespace {

using testing::TestOptimizer;

constexpr int kSteps = 4;

struct OptimizerRun {
  testing::ExecutorRun result;
  int64_t compiled_updates = 0;
  int64_t kernels_compiled = 0;
  size_t parameters = 0;
};

struct RunSetup {
  TestOptimizer optimizer = TestOptimizer::AdamW;
  bool streaming = false;
  bool compiled_blocks = false;
  bool compiled_optimizer = false;
};

OptimizerRun train(const std::string& family, const RunSetup& setup) {
  models::CausalLM model = testing::random_fixture_model(family, 2);
  auto cache = std::make_shared<compile::KernelCache>();
  if (setup.compiled_blocks)
    model.use_compiled_blocks(std::make_shared<models::CompiledBlocks>(cache));
  auto optimizer = testing::test_optimizer(model, setup.optimizer);
  if (setup.compiled_optimizer) {
    EXPECT_TRUE(optimizer->use_compiled_updates(cache));
  }
  std::unique_ptr<exec::Executor> executor;
  if (setup.streaming) {
    executor = std::make_unique<exec::StreamingExecutor>(
        model, *optimizer, std::make_unique<exec::StandInDevice>(), exec::StreamingOptions{});
  } else {
    executor = std::make_unique<exec::ResidentExecutor>(model, *optimizer);
  }
  Generator gen(29);
  const auto batches = testing::random_token_steps(gen, kSteps, 12, model.config().vocab_size);
  OptimizerRun r;
  r.result = testing::run_executor_steps(*executor, model, batches, 1.0);
  executor.reset();  // the streaming executor's optimizer thread is done
  r.compiled_updates = optimizer->compiled_updates();
  r.kernels_compiled = cache->stats().compiled;
  r.parameters = model.parameters().size();
  return r;
}

// Losses within loss_rel; every parameter element within param_abs, except
// at most `outliers` (a share of all elements), which stay within
// outlier_abs.
void expect_close(const OptimizerRun& ref, const OptimizerRun& got, double loss_rel,
                  double param_abs, double outliers = 0, double outlier_abs = 0) {
  ASSERT_EQ(ref.result.stats.size(), got.result.stats.size());
  for (size_t s = 0; s < ref.result.stats.size(); ++s) {
    const double a = got.result.stats[s].loss, b = ref.result.stats[s].loss;
    EXPECT_NEAR(a, b, loss_rel * std::abs(b)) << "step " << s;
  }
  EXPECT_NE(ref.result.stats.front().loss, ref.result.stats.back().loss);
  int64_t elements = 0, beyond = 0;
  for (size_t i = 0; i < ref.result.params.size(); ++i) {
    for (size_t e = 0; e < ref.result.params[i].size(); ++e) {
      const double diff = std::abs(got.result.params[i][e] - ref.result.params[i][e]);
      ++elements;
      if (diff <= param_abs) continue;
      ++beyond;
      ASSERT_LE(diff, outlier_abs) << "parameter " << i << " element " << e;
    }
  }
  EXPECT_LE(static_cast<double>(beyond), outliers * static_cast<double>(elements))
      << beyond << " of " << elements << " elements differ by more than " << param_abs;
}

class TrainCompileOptimizer : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!compile::compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  }
};

// The compiled AdamW does optim's operations in optim's order
// (compiled_adamw.h): with the blocks as they are, the run is the
// hand-written one bit for bit.
TEST_P(TrainCompileOptimizer, CompiledAdamWTrainsBitForBitAsTheHandWrittenKernels) {
  const OptimizerRun plain = train(GetParam(), {});
  RunSetup s;
  s.compiled_optimizer = true;
  const OptimizerRun fused = train(GetParam(), s);
  for (size_t step = 0; step < plain.result.stats.size(); ++step) {
    EXPECT_EQ(fused.result.stats[step].loss, plain.result.stats[step].loss) << "step " << step;
  }
  for (size_t i = 0; i < plain.result.params.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(plain.result.params[i].data(), fused.result.params[i].data(),
                             plain.result.params[i].size() * sizeof(float)))
        << "parameter " << i;
  }
  EXPECT_EQ(fused.compiled_updates, static_cast<int64_t>(kSteps * fused.parameters));
  EXPECT_GT(fused.kernels_compiled, 0);
  EXPECT_EQ(plain.compiled_updates, 0);
}

// train.compile on as the trainer sets it up: blocks and optimizer
// compiled, against neither; resident and streaming (which updates stage
// by stage on its optimizer thread). The compiled blocks' gradients differ
// from autograd's in the last bits (GELU is computed as x sigmoid(2u),
// compile/chains.h), and with 8-bit states such a difference can move a
// moment across a quantization boundary: one code step, which moves that
// element's update by a fraction of lr (3e-3). So 8-bit runs allow up to
// 0.1% of the elements beyond 1e-4, each within lr (gpt2: 1 of 30,624).
TEST_P(TrainCompileOptimizer, BlocksAndOptimizerCompiledGiveTheLossesOfNeither) {
  for (TestOptimizer kind : {TestOptimizer::AdamW, TestOptimizer::AdamW8bit}) {
    for (bool streaming : {false, true}) {
      SCOPED_TRACE(std::string(kind == TestOptimizer::AdamW ? "adamw" : "adamw8bit") +
                   (streaming ? " streaming" : " resident"));
      RunSetup plain_setup;
      plain_setup.optimizer = kind;
      plain_setup.streaming = streaming;
      RunSetup fused_setup = plain_setup;
      fused_setup.compiled_blocks = fused_setup.compiled_optimizer = true;
      const OptimizerRun plain = train(GetParam(), plain_setup);
      const OptimizerRun fused = train(GetParam(), fused_setup);
      if (kind == TestOptimizer::AdamW) {
        expect_close(plain, fused, 1e-5, 1e-4);
      } else {
        expect_close(plain, fused, 1e-5, 1e-4, 1e-3, 3e-3);
      }
      EXPECT_EQ(fused.compiled_updates, static_cast<int64_t>(kSteps * fused.parameters));
      EXPECT_GT(fused.kernels_compiled, 0);
    }
  }
}

// A parameter far larger than the pieces the compiled updates cut it into
// (AdamW: 64K elements; 8-bit: 256 blocks of 256, the last block short),
// with a bf16 shadow: one step from the same state as the hand-written
// optimizer gives the same parameter, shadow and states, bit for bit
// (8-bit: every code but near-ties, compiled_adamw8bit.h, at most 1 in
// 1000), so every piece was updated and in its place.
TEST(TrainCompileOptimizerPieces, LargeParametersUpdateInPiecesAsTheHandWrittenKernels) {
  if (!compile::compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  for (TestOptimizer kind : {TestOptimizer::AdamW, TestOptimizer::AdamW8bit}) {
    SCOPED_TRACE(kind == TestOptimizer::AdamW ? "adamw" : "adamw8bit");
    const int64_t n = 3 * 65536 + 300 * 256 + 100;
    Generator gen(3);
    std::vector<float> p0, g0;
    for (int64_t i = 0; i < n; ++i) {
      p0.push_back(static_cast<float>(gen.normal()));
      g0.push_back(static_cast<float>(0.1 * gen.normal()));
    }
    auto step = [&](bool compiled) {
      Tensor p = Tensor::from_vector(p0, {n});
      p.set_requires_grad(true);  // as a model's parameter
      p.set_grad(Tensor::from_vector(g0, {n}));
      optim::AdamWOptions o;
      o.lr = 1e-2;
      std::unique_ptr<optim::Optimizer> opt;
      if (kind == TestOptimizer::AdamW) {
        opt = std::make_unique<optim::AdamW>(nn::NamedParameters{{"w", p}}, o);
      } else {
        optim::AdamW8bitOptions o8;
        o8.block_size = 256;
        o8.min_8bit_numel = 512;
        opt = std::make_unique<optim::AdamW8bit>(nn::NamedParameters{{"w", p}}, o,
                                                 std::vector<std::string>{}, o8);
      }
      const Tensor shadow = Tensor::zeros({n}, DType::BF16);
      opt->set_bf16_shadow(0, shadow);
      if (compiled) {
        EXPECT_TRUE(opt->use_compiled_updates(std::make_shared<compile::KernelCache>()));
      }
      opt->step(1e-2, 0.5);
      EXPECT_EQ(opt->compiled_updates(), compiled ? 1 : 0);
      std::vector<std::vector<double>> out{p.to_doubles(), shadow.to_doubles()};
      for (const auto& [name, t] : opt->state()) out.push_back(t.to_doubles());
      return out;
    };
    const auto hand = step(false), got = step(true);
    ASSERT_EQ(hand.size(), got.size());
    for (size_t k = 0; k < hand.size(); ++k) {
      ASSERT_EQ(hand[k].size(), got[k].size());
      size_t differing = 0;
      for (size_t e = 0; e < hand[k].size(); ++e) differing += hand[k][e] != got[k][e];
      // The 8-bit states' codes (entries 2 and 4 after p and the shadow).
      const bool codes = kind == TestOptimizer::AdamW8bit && (k == 2 || k == 4);
      EXPECT_LE(differing, codes ? hand[k].size() / 1000 : 0) << "entry " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, TrainCompileOptimizer, ::testing::Values("llama", "gpt2"));

}  // namespace
}  // namespace lt
