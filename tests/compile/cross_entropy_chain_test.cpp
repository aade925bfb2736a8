// The softmax cross-entropy around the lm_head GEMM as compiled chains
// (compile/cross_entropy_chain.h): the forward's logsumexp and loss and the
// backward's softmax minus one-hot, on the CPU through the JIT, against
// float64 (tests/support/cross_entropy_ref.h) and against the unfused
// hand-written ops (ops::cross_entropy, ops::cross_entropy_backward), in
// f32 and bf16 logits, with ignored rows. The in-place backward writes the
// gradient over the logits, so that lm_head_loss's backward with compiled
// kernels holds no more memory than with the hand-written ones (what
// exec/memory_budget.cpp counts).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>

#include "autograd/cross_entropy_kernels.h"
#include "autograd/engine.h"
#include "autograd/functions.h"
#include "compile/compiler_info.h"
#include "compile/cross_entropy_chain.h"
#include "compile/gpu_kernel.h"
#include "core/allocator.h"
#include "core/random.h"
#include "support/cross_entropy_ref.h"

namespace lt::compile {
namespace {

class CrossEntropyChain : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  }
};

// 37 rows of 1000 classes (not a multiple of the kernel's lanes), logits
// spread wide enough (sd 3) that the max shift matters; every fifth row
// ignored. The targets include the first and the last class.
TEST_P(CrossEntropyChain, ForwardAndBackwardEqualFloat64AndTheUnfusedOps) {
  const DType dtype = GetParam();
  const int64_t n = 37, v = 1000, ignore = -100;
  testing::CrossEntropyCase c = testing::random_cross_entropy_case(n, v, 5, ignore, 7);
  c.targets[0] = 0;
  c.targets[1] = v - 1;
  const Tensor logits = Tensor::from_vector(c.logits, {n, v}).to(dtype);
  const std::vector<int64_t>& targets = c.targets;
  const Tensor target_tensor = Tensor::from_vector(targets, {n});
  // The reference sees the logits as stored (bf16-rounded).
  const std::vector<double> x = logits.to_doubles();
  const testing::CrossEntropyRef ref = testing::cross_entropy_f64(x, targets, v, ignore);
  const double grad_loss = 0.75;

  KernelCache cache;
  const ops::CrossEntropyOutput got = compiled_cross_entropy(cache, logits, target_tensor, ignore);
  const ops::CrossEntropyOutput hand = ops::cross_entropy(logits, target_tensor, ignore);
  EXPECT_EQ(got.count, hand.count);
  EXPECT_EQ(got.count, n - n / 5);
  // Each row's loss in f32 (sums of 1000 exps, rounded in another order
  // than double): relative 1e-6 on the mean.
  EXPECT_NEAR(got.loss.item(), ref.loss, 1e-6 * ref.loss);
  EXPECT_NEAR(got.loss.item(), hand.loss.item(), 1e-6 * ref.loss);
  const std::vector<double> lse = got.lse.to_doubles(), hand_lse = hand.lse.to_doubles();
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] == ignore) {
      EXPECT_EQ(lse[i], 0.0) << "row " << i;
      continue;
    }
    EXPECT_NEAR(lse[i], hand_lse[i], 1e-6 * std::abs(hand_lse[i]) + 1e-6) << "row " << i;
  }

  const Tensor grad = compiled_cross_entropy_backward(cache, grad_loss, logits, target_tensor,
                                                      got.lse, ignore, got.count);
  const Tensor hand_grad = ops::cross_entropy_backward(
      Tensor::scalar(grad_loss, DType::F64), logits, target_tensor, hand.lse, ignore, hand.count);
  ASSERT_EQ(grad.shape(), logits.shape());
  ASSERT_EQ(grad.dtype(), dtype);
  const std::vector<double> g = grad.to_doubles(), hg = hand_grad.to_doubles();
  // f32: a few ulps of the softmax (exp of a value off by an ulp of lse);
  // bf16: both round the same f32 value, so within one bf16 step.
  const double rel = dtype == DType::BF16 ? 0x1.0p-7 : 1e-5;
  for (size_t e = 0; e < g.size(); ++e) {
    const double want = ref.grad[e] * grad_loss;
    ASSERT_NEAR(g[e], want, rel * std::abs(want) + 1e-9) << "element " << e;
    ASSERT_NEAR(g[e], hg[e], rel * std::abs(hg[e]) + 1e-9) << "element " << e;
  }
  // Kernels: one forward, one backward, compiled once each.
  EXPECT_EQ(cache.stats().compiled, 2);
}

TEST_P(CrossEntropyChain, NoCountedRowsGiveZeroLossAndGradient) {
  const int64_t n = 3, v = 17;
  const Tensor logits = Tensor::full({n, v}, 1.5, GetParam());
  const Tensor targets = Tensor::full({n}, -100, DType::I64);
  KernelCache cache;
  const ops::CrossEntropyOutput got = compiled_cross_entropy(cache, logits, targets);
  EXPECT_EQ(got.count, 0);
  EXPECT_EQ(got.loss.item(), 0.0);
  const Tensor grad =
      compiled_cross_entropy_backward(cache, 1.0, logits, targets, got.lse, -100, 0);
  for (double d : grad.to_doubles()) EXPECT_EQ(d, 0.0);
}

TEST_P(CrossEntropyChain, ATargetOutsideTheVocabularyIsAnError) {
  const Tensor logits = Tensor::full({2, 5}, 0.0, GetParam());
  const Tensor targets = Tensor::from_vector(std::vector<int64_t>{1, 5}, {2});
  KernelCache cache;
  try {
    compiled_cross_entropy(cache, logits, targets);
    FAIL() << "target 5 of 5 classes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 5 at row 1"), std::string::npos) << e.what();
  }
}

TEST_P(CrossEntropyChain, InPlaceBackwardWritesTheGradientOverTheLogits) {
  const DType dtype = GetParam();
  const int64_t n = 9, v = 300;
  Generator gen(21);
  const Tensor logits = Tensor::randn({n, v}, gen, dtype);
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t& x : t) x = static_cast<int64_t>(gen.below(static_cast<uint64_t>(v)));
  t[2] = -100;
  const Tensor targets = Tensor::from_vector(t, {n});
  KernelCache cache;
  const ops::CrossEntropyOutput fwd = compiled_cross_entropy(cache, logits, targets);
  const Tensor want =
      compiled_cross_entropy_backward(cache, 0.7, logits, targets, fwd.lse, -100, fwd.count);
  const void* storage = logits.data_ptr();
  compiled_cross_entropy_backward_(cache, 0.7, logits, targets, fwd.lse, -100, fwd.count);
  EXPECT_EQ(logits.data_ptr(), storage);
  EXPECT_EQ(logits.to_doubles(), want.to_doubles());
  // Memory that overlaps an input otherwise than as the same tensor is refused.
  const Tensor shifted = Tensor::randn({2 * n, v}, gen, dtype);
  EXPECT_THROW(call(kernel_for(cache, cross_entropy_backward_graph(dtype), Device::cpu()),
                    cross_entropy_backward_graph(dtype),
                    {shifted.slice(0, 0, n), fwd.lse, Tensor::full({n}, 1.0, DType::F32),
                     Tensor::full({n}, 1.0, DType::F32), Tensor::full({v}, 1.0, DType::F32)},
                    {shifted.slice(0, 1, n + 1)}),
               Error);
}

// lm_head_loss's backward (one chunk of logits) with the compiled
// cross-entropy holds at its peak no more than with the hand-written one,
// which writes the gradient over the logits: a gradient in a new chunk, as
// before compiled_cross_entropy_backward_, was a chunk more than the
// memory budget counts. (f32: with bf16 on the CPU the hand-written path
// holds more around its GEMMs, and a missing chunk hides in that.)
TEST(CrossEntropyChainHead, LmHeadLossBackwardHoldsOneChunkOfLogits) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  const DType dtype = DType::F32;
  const int64_t n = 64, c = 16, v = 4096;  // 1 MiB of f32 logits: one chunk
  Generator gen(22);
  const Tensor h0 = Tensor::randn({n, c}, gen, dtype), w0 = Tensor::randn({v, c}, gen, dtype);
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t& x : t) x = static_cast<int64_t>(gen.below(static_cast<uint64_t>(v)));
  const Tensor targets = Tensor::from_vector(t, {n});
  auto backward_peak = [&](bool compiled) {
    std::optional<autograd::CrossEntropyKernelsScope> scope;
    if (compiled) scope.emplace(std::make_shared<KernelCache>());
    Tensor h = h0.clone().set_requires_grad(), w = w0.clone().set_requires_grad();
    const Tensor loss = lm_head_loss(h, w, targets, static_cast<double>(n));
    cpu_allocator().reset_peak();
    const int64_t before = cpu_allocator().stats().current_bytes;
    backward(loss);
    return cpu_allocator().stats().peak_bytes - before;
  };
  backward_peak(true);  // compiles the kernels, outside the measured call
  const int64_t hand = backward_peak(false), compiled = backward_peak(true);
  const int64_t chunk = n * v * static_cast<int64_t>(dtype_size(dtype));
  EXPECT_LT(compiled, hand + chunk / 2) << "hand-written " << hand << " B, compiled " << compiled
                                        << " B, a chunk of logits " << chunk << " B";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CrossEntropyChain, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lt::compile
