// Cross-entropy: loss and gradient against float64 formulas written here,
// ignored targets, bf16 logits against f32, gradients against central
// differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "ops/cross_entropy.h"
#include "support/cross_entropy_ref.h"
#include "support/errors.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::randn64;

using testing::error_of;

using Reference = testing::CrossEntropyRef;
Reference ce_ref(const std::vector<double>& x, const std::vector<int64_t>& targets, int64_t V,
                 int64_t ignore) {
  return testing::cross_entropy_f64(x, targets, V, ignore);
}

TEST(CrossEntropy, LossAndGradientMatchFloat64Formula) {
  Generator gen(51);
  const int64_t N = 7, V = 13;
  Tensor logits = randn64({N, V}, gen, 3.0);
  std::vector<int64_t> tv = {4, -100, 12, 0, 4, -100, 9};
  for (DType tt : {DType::I64, DType::I32}) {
    Tensor targets = Tensor::from_vector<int64_t>(tv, {N}).to(tt);
    auto out = ops::cross_entropy(logits, targets, -100);
    Reference ref = ce_ref(logits.to_doubles(), tv, V, -100);
    EXPECT_EQ(out.count, 5);
    EXPECT_EQ(out.loss.dim(), 0);
    EXPECT_NEAR(out.loss.item(), ref.loss, 1e-12);
    Tensor g = ops::cross_entropy_backward(Tensor::scalar(2.5, DType::F64), logits, targets,
                                           out.lse, -100, out.count);
    std::vector<double> expected = ref.grad;
    for (double& v : expected) v *= 2.5;
    EXPECT_TRUE(all_close(g.to_doubles(), expected, 1e-12, 0));
  }
}

TEST(CrossEntropy, CustomIgnoreIndexAndBadTargets) {
  Generator gen(52);
  const int64_t N = 5, V = 13;
  Tensor logits = randn64({N, V}, gen);
  std::vector<int64_t> tv = {3, 3, 1, 12, 0};
  auto out = ops::cross_entropy(logits, Tensor::from_vector<int64_t>(tv, {N}), 3);
  EXPECT_EQ(out.count, 3);
  EXPECT_NEAR(out.loss.item(), ce_ref(logits.to_doubles(), tv, V, 3).loss, 1e-12);
  // -100 is an ordinary (out-of-range) target once ignore_index is 3.
  Tensor bad = Tensor::from_vector<int64_t>({3, -100, 1, 2, 0}, {N});
  std::string msg = error_of([&] { ops::cross_entropy(logits, bad, 3); });
  EXPECT_THAT(msg, ::testing::HasSubstr("target -100"));
  EXPECT_THAT(msg, ::testing::HasSubstr("[0, 13)"));
  Tensor high = Tensor::from_vector<int32_t>({0, 1, 13, 2, 0}, {N});
  EXPECT_THAT(error_of([&] { cross_entropy(logits, high); }), ::testing::HasSubstr("target 13"));
  EXPECT_THROW(ops::cross_entropy(logits, Tensor::zeros({N + 1}, DType::I64), -100), Error);
}

TEST(CrossEntropy, AllIgnoredGivesZeroLossAndZeroGradient) {
  Generator gen(53);
  Tensor logits = randn64({4, 13}, gen);
  Tensor targets = Tensor::full({4}, -100, DType::I64);
  Tensor leaf = logits.clone();
  leaf.set_requires_grad(true);
  Tensor loss = cross_entropy(leaf, targets);
  EXPECT_EQ(loss.item(), 0.0);
  backward(loss);
  ASSERT_TRUE(leaf.grad().defined());
  EXPECT_EQ(leaf.grad().shape(), logits.shape());
  EXPECT_TRUE(all_close(leaf.grad().to_doubles(), std::vector<double>(52, 0.0), 0, 0));
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  // exp(1000) overflows; the max shift must keep everything finite.
  std::vector<double> x = {1000, 999, 998, -1000, 0, 1000};
  Tensor logits = Tensor::from_doubles(x, {2, 3}, DType::F32);
  std::vector<int64_t> tv = {1, 2};
  auto out = ops::cross_entropy(logits, Tensor::from_vector<int64_t>(tv, {2}), -100);
  EXPECT_NEAR(out.loss.item(), ce_ref(x, tv, 3, -100).loss, 1e-5);
}

TEST(CrossEntropy, Bf16LogitsComputeInF32) {
  Generator gen(54);
  const int64_t N = 9, V = 67;
  // Values that bf16 holds exactly, so bf16 and f32 inputs are the same numbers.
  Tensor logits = randn64({N, V}, gen, 4.0).to(DType::BF16);
  Tensor l32 = logits.to(DType::F32);
  std::vector<int64_t> tv = {1, 66, -100, 0, 5, 5, 30, -100, 12};
  Tensor targets = Tensor::from_vector<int64_t>(tv, {N});
  auto ob = ops::cross_entropy(logits, targets, -100);
  auto of = ops::cross_entropy(l32, targets, -100);
  EXPECT_EQ(ob.loss.dtype(), DType::F32);
  Reference ref = ce_ref(l32.to_doubles(), tv, V, -100);
  // bf16 arithmetic would be off by ~1e-2; f32 is off by ~1e-7.
  EXPECT_NEAR(ob.loss.item(), ref.loss, 1e-5 * std::abs(ref.loss));
  EXPECT_NEAR(ob.loss.item(), of.loss.item(), 1e-6 * std::abs(ref.loss));
  Tensor one = Tensor::scalar(1.0, DType::F32);
  Tensor gb = ops::cross_entropy_backward(one, logits, targets, ob.lse, -100, ob.count);
  Tensor gf = ops::cross_entropy_backward(one, l32, targets, of.lse, -100, of.count);
  EXPECT_EQ(gb.dtype(), DType::BF16);
  auto gbv = gb.to_doubles();
  for (size_t i = 0; i < gbv.size(); ++i) {
    // The f32 gradient rounded once to bf16: within half a bf16 step.
    EXPECT_LE(std::abs(gbv[i] - ref.grad[i]), std::abs(ref.grad[i]) * 0x1p-8 * 1.01 + 1e-9) << i;
  }
  EXPECT_TRUE(all_close(gf.to_doubles(), ref.grad, 1e-7, 1e-5));
}

// Logits whose target logit is raised by 6, so the target's softmax is far
// from 0 and its gradient (p - 1) differs clearly from -1: a one-hot term
// computed from an overwritten logit would show.
Tensor logits_with_likely_targets(int64_t N, int64_t V, const std::vector<int64_t>& tv,
                                  Generator& gen, DType dtype) {
  std::vector<double> x = randn64({N, V}, gen).to_doubles();
  for (int64_t i = 0; i < N; ++i) {
    if (tv[i] >= 0) x[i * V + tv[i]] += 6.0;
  }
  return Tensor::from_doubles(x, {N, V}, dtype);
}

TEST(CrossEntropy, BackwardInPlaceWritesTheGradientOverTheLogits) {
  Generator gen(57);
  const int64_t N = 9, V = 67;
  std::vector<int64_t> tv = {1, 66, -100, 0, 5, 5, 30, -100, 12};
  Tensor targets = Tensor::from_vector<int64_t>(tv, {N});
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor logits = logits_with_likely_targets(N, V, tv, gen, dtype);
    // The reference from the very values the op reads (bf16 holds them exactly).
    Reference ref = ce_ref(logits.to_doubles(), tv, V, -100);
    for (double& v : ref.grad) v *= 2.5;
    auto out = ops::cross_entropy(logits, targets, -100);
    ASSERT_EQ(out.count, 7);
    void* const data = logits.data_ptr();
    ops::cross_entropy_backward_(Tensor::scalar(2.5, DType::F64), logits, targets, out.lse, -100,
                                 out.count);
    EXPECT_EQ(logits.data_ptr(), data);
    EXPECT_EQ(logits.dtype(), dtype);
    const std::vector<double> g = logits.to_doubles();
    for (int64_t r : {2, 7}) {  // the ignored rows: zeros
      for (int64_t j = 0; j < V; ++j) EXPECT_EQ(g[r * V + j], 0.0) << r << " " << j;
    }
    if (dtype == DType::F32) {
      EXPECT_TRUE(all_close(g, ref.grad, 1e-7, 1e-5));
    } else {
      for (size_t i = 0; i < g.size(); ++i) {
        // The f32 gradient rounded once to bf16: within half a bf16 step.
        EXPECT_LE(std::abs(g[i] - ref.grad[i]), std::abs(ref.grad[i]) * 0x1p-8 * 1.01 + 1e-9) << i;
      }
    }
    // The target elements: (p - 1) * 2.5 / 7 with p well inside (0, 1).
    for (int64_t r = 0; r < N; ++r) {
      if (tv[r] < 0) continue;
      const double want = ref.grad[r * V + tv[r]];
      EXPECT_LT(want, -0.01 * 2.5 / 7);
      EXPECT_GT(want, -0.99 * 2.5 / 7);
      EXPECT_NEAR(g[r * V + tv[r]], want, std::abs(want) * 0x1p-8 * 1.01) << r;
    }
  }
}

TEST(CrossEntropy, BackwardInPlaceRefusesStridedLogits) {
  Generator gen(58);
  const int64_t N = 5, V = 13;
  Tensor logits = randn64({V, N}, gen).to(DType::F32).transpose(0, 1);  // [N, V], not contiguous
  Tensor targets = Tensor::from_vector<int64_t>({3, -100, 1, 12, 0}, {N});
  auto out = ops::cross_entropy(logits, targets, -100);
  const std::vector<double> before = logits.to_doubles();
  EXPECT_THAT(error_of([&] {
                ops::cross_entropy_backward_(Tensor::scalar(1.0, DType::F64), logits, targets,
                                             out.lse, -100, out.count);
              }),
              ::testing::HasSubstr("cross_entropy_backward_: the logits must be contiguous"));
  EXPECT_EQ(logits.to_doubles(), before);  // untouched
}

TEST(CrossEntropyGrad, LogitsMatchFiniteDifferences) {
  Generator gen(55);
  Tensor logits = randn64({7, 13}, gen, 2.0);
  Tensor targets = Tensor::from_vector<int64_t>({4, -100, 12, 0, 4, -100, 9}, {7});
  EXPECT_TRUE(gradcheck([](auto& t) { return cross_entropy(t[0], t[1]); }, {logits, targets}));
  // Scaled by a later op, through a transposed (non-contiguous) view.
  Tensor lt = randn64({13, 7}, gen);
  EXPECT_TRUE(gradcheck(
      [](auto& t) { return scale(cross_entropy(transpose(t[0], 0, 1), t[1]), 3); }, {lt, targets}));
}

TEST(CrossEntropy, LargeShapesRunInParallelAndMatchTheFormula) {
  // 301 x 199 logits: several row chunks, unlike the small shapes above.
  Generator gen(56);
  const int64_t N = 301, V = 199;
  Tensor logits = randn64({N, V}, gen, 2.0);
  std::vector<int64_t> tv(N);
  for (int64_t i = 0; i < N; ++i) tv[i] = i % 7 == 3 ? -100 : static_cast<int64_t>(gen.below(V));
  Tensor targets = Tensor::from_vector<int64_t>(tv, {N});
  auto out = ops::cross_entropy(logits, targets, -100);
  Reference ref = ce_ref(logits.to_doubles(), tv, V, -100);
  EXPECT_NEAR(out.loss.item(), ref.loss, 1e-12);
  Tensor g = ops::cross_entropy_backward(Tensor::scalar(1.0, DType::F64), logits, targets, out.lse,
                                         -100, out.count);
  EXPECT_TRUE(all_close(g.to_doubles(), ref.grad, 1e-14, 1e-10));
}

}  // namespace
}  // namespace lt
