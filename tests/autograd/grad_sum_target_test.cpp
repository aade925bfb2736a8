// Note [Weight gradients summed by the GEMM] (autograd/engine.h): when the
// engine offers a node a leaf's .grad to add into, and when it must not;
// linear's weight gradient added by the GEMM, against float64 sums
// computed here.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/record.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "support/scoped_env.h"

namespace lt {
namespace {

using testing::ScopedEnv;

// A node that scales its input by `factor`, recording what the engine
// offered for its input; when offered, it adds into the offer and returns
// it, as linear's backward does.
struct Offers {
  int asked = 0;
  int offered = 0;
};

Tensor scaled_with_offer(const Tensor& w, double factor, Offers* offers) {
  return autograd::record("scaled_with_offer", {w}, ops::scale(w.detach(), factor),
                          [factor, offers](const Tensor& g) {
                            ++offers->asked;
                            Tensor target = autograd::grad_sum_target(0);
                            Tensor gw = ops::scale(g, factor);
                            if (!target.defined()) return std::vector<Tensor>{gw};
                            ++offers->offered;
                            ops::add_(target, gw);
                            return std::vector<Tensor>{target};
                          });
}

Tensor f64_leaf(std::vector<double> v) {
  const auto n = static_cast<int64_t>(v.size());
  Tensor t = Tensor::from_doubles(std::move(v), {n}, DType::F64);
  t.set_requires_grad(true);
  return t;
}

TEST(GradSumTarget, TheSoleUseOfALeafWithAGradIsOfferedItsGrad) {
  Tensor w = f64_leaf({1, 2, 3});
  Offers offers;
  backward(sum(scaled_with_offer(w, 2, &offers)));
  EXPECT_EQ(offers.offered, 0);  // no .grad yet: nothing to add into
  void* const data = w.grad().data_ptr();
  backward(sum(scaled_with_offer(w, 5, &offers)));
  EXPECT_EQ(offers.asked, 2);
  EXPECT_EQ(offers.offered, 1);
  EXPECT_EQ(w.grad().data_ptr(), data);
  EXPECT_EQ(w.grad().to_doubles(), (std::vector<double>{7, 7, 7}));
}

TEST(GradSumTarget, AHeldGradIsNotOfferedAndKeepsItsValues) {
  Tensor w = f64_leaf({1, 2, 3});
  Offers offers;
  backward(sum(scaled_with_offer(w, 2, &offers)));
  Tensor held = w.grad();
  backward(sum(scaled_with_offer(w, 5, &offers)));
  EXPECT_EQ(offers.offered, 0);
  EXPECT_EQ(held.to_doubles(), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(w.grad().to_doubles(), (std::vector<double>{7, 7, 7}));
}

TEST(GradSumTarget, AViewOfTheGradBlocksTheOffer) {
  Tensor w = f64_leaf({1, 2, 3});
  Offers offers;
  backward(sum(scaled_with_offer(w, 2, &offers)));
  Tensor view = w.grad().slice(0, 0, 2);
  backward(sum(scaled_with_offer(w, 5, &offers)));
  EXPECT_EQ(offers.offered, 0);
  EXPECT_EQ(view.to_doubles(), (std::vector<double>{2, 2}));
  EXPECT_EQ(w.grad().to_doubles(), (std::vector<double>{7, 7, 7}));
}

TEST(GradSumTarget, ALeafReadTwiceIsNotOffered) {
  Tensor w = f64_leaf({1, 2, 3});
  Offers offers;
  backward(sum(scaled_with_offer(w, 2, &offers)));
  // Two reads of w: adding into .grad from one would be summed again with
  // the other's gradient.
  backward(sum(add(scaled_with_offer(w, 5, &offers), scaled_with_offer(w, 11, &offers))));
  EXPECT_EQ(offers.offered, 0);
  EXPECT_EQ(w.grad().to_doubles(), (std::vector<double>{18, 18, 18}));
}

TEST(GradSumTarget, NothingIsOfferedWithTheSeparatePass) {
  const ScopedEnv add_pass("LT_WEIGHT_GRAD_SUM", "add");
  Tensor w = f64_leaf({1, 2, 3});
  Offers offers;
  backward(sum(scaled_with_offer(w, 2, &offers)));
  backward(sum(scaled_with_offer(w, 5, &offers)));
  EXPECT_EQ(offers.offered, 0);
  EXPECT_EQ(w.grad().to_doubles(), (std::vector<double>{7, 7, 7}));
}

TEST(GradSumTarget, HooksFireOnceWithTheSumMadeInPlace) {
  Tensor w = f64_leaf({1, 2, 3});
  Offers offers;
  backward(sum(scaled_with_offer(w, 2, &offers)));
  int calls = 0;
  std::vector<double> seen;
  w.register_grad_ready_hook([&](const Tensor& p) {
    ++calls;
    seen = p.grad().to_doubles();
  });
  backward(sum(scaled_with_offer(w, 5, &offers)));
  EXPECT_EQ(offers.offered, 1);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<double>{7, 7, 7}));
}

// Deterministic values in [-1, 1).
std::vector<double> values(int64_t n, int seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] =
        std::fmod(0.37 * static_cast<double>(i * (seed + 3) + seed), 2.0) - 1;
  return v;
}

// The weight gradient of sum over chunks c of <linear(x_c, W), gy_c>,
// summed in float64: sum over chunks and rows of gy[r, o] * x[r, i].
std::vector<double> weight_grad_f64(const std::vector<std::vector<double>>& xs,
                                    const std::vector<std::vector<double>>& gys, int64_t rows,
                                    int64_t in, int64_t out) {
  std::vector<double> dw(static_cast<size_t>(out * in), 0.0);
  for (size_t c = 0; c < xs.size(); ++c)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i)
          dw[static_cast<size_t>(o * in + i)] +=
              gys[c][static_cast<size_t>(r * out + o)] * xs[c][static_cast<size_t>(r * in + i)];
  return dw;
}

// Three chunks through linear (or residual_linear_unread), as the streaming
// executor runs them; the weight's .grad against the float64 sum.
// `in_gemm`: whether chunks after the first must have been summed by the GEMM.
void expect_chunks_sum(DType dtype, bool residual_form, double tolerance, bool in_gemm) {
  const int64_t rows = 6, in = 5, out = 4;
  Tensor w = Tensor::from_doubles(values(out * in, 1), {out, in}, DType::F64).to(dtype);
  w.set_requires_grad(true);
  std::vector<std::vector<double>> xs, gys;
  void* data = nullptr;
  const uint64_t sums_before = autograd::grad_sums_in_place();
  for (int c = 0; c < 3; ++c) {
    xs.push_back(values(rows * in, 10 + c));
    gys.push_back(values(rows * out, 20 + c));
    Tensor x = Tensor::from_doubles(xs.back(), {rows, in}, DType::F64).to(dtype);
    Tensor gy = Tensor::from_doubles(gys.back(), {rows, out}, DType::F64).to(dtype);
    Tensor y = residual_form ? residual_linear_unread(Tensor::zeros({rows, out}, dtype), x, w)
                             : linear(x, w);
    backward(y, gy);
    if (c == 0) data = w.grad().data_ptr();
    EXPECT_EQ(w.grad().data_ptr(), data) << "chunk " << c;
  }
  EXPECT_EQ(autograd::grad_sums_in_place() - sums_before, in_gemm ? 2u : 0u);
  const std::vector<double> want = weight_grad_f64(xs, gys, rows, in, out);
  const std::vector<double> got = w.grad().to_doubles();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tolerance) << i;
}

TEST(GradSumTarget, LinearChunksSumTheWeightGradientInPlace) {
  expect_chunks_sum(DType::F32, false, 1e-5, true);
  expect_chunks_sum(DType::F64, false, 1e-12, true);
  const ScopedEnv add_pass("LT_WEIGHT_GRAD_SUM", "add");
  expect_chunks_sum(DType::F32, false, 1e-5, false);
}

TEST(GradSumTarget, ResidualLinearUnreadChunksSumTheWeightGradientInPlace) {
  expect_chunks_sum(DType::F32, true, 1e-5, true);
}

TEST(GradSumTarget, Bf16OnTheCpuSumsByTheSeparatePass) {
  // The CPU computes bf16 in f32, so a bf16 .grad is no GEMM output: the
  // offer goes unused and the sum is the separate pass's.
  expect_chunks_sum(DType::BF16, false, 0.05, false);
}

TEST(GradSumTarget, LinearBackwardAddsIntoTheRunningSum) {
  const int64_t rows = 3, in = 2, out = 2;
  Tensor x = Tensor::from_doubles({1, 2, 3, 4, 5, 6}, {rows, in}, DType::F32);
  Tensor g = Tensor::from_doubles({1, -1, 2, 0.5, -3, 1}, {rows, out}, DType::F32);
  Tensor sum = Tensor::from_doubles({10, 20, 30, 40}, {out, in}, DType::F32);
  const ops::LinearGrads grads = ops::linear_backward(g, x, Tensor(), false, true, false, sum);
  EXPECT_EQ(grads.weight.impl(), sum.impl());
  // g^T x by hand: row o, column i = sum_r g[r, o] x[r, i].
  EXPECT_EQ(
      sum.to_doubles(),
      (std::vector<double>{10 + (1 * 1 + 2 * 3 - 3 * 5), 20 + (1 * 2 + 2 * 4 - 3 * 6),
                           30 + (-1 * 1 + 0.5 * 3 + 1 * 5), 40 + (-1 * 2 + 0.5 * 4 + 1 * 6)}));
  // A sum of another shape is not used.
  Tensor wrong = Tensor::zeros({1, out * in}, DType::F32);
  EXPECT_NE(ops::linear_backward(g, x, Tensor(), false, true, false, wrong).weight.impl(),
            wrong.impl());
}

}  // namespace
}  // namespace lt
