// matmul and linear: forward against float64 loops written here (every
// transpose, batched and shared b, strided views, half types), gradients
// against central differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "ops/matmul.h"
#include "support/errors.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::all_close;
using testing::error_of;
using testing::gradcheck;
using testing::randn64;

// op(a) @ op(b) by the definition, from the logical values of a and b (any
// strides). b is shared by the batch when it is 2D.
std::vector<double> reference_matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const std::vector<double> av = a.to_doubles(), bv = b.to_doubles();
  const int64_t ar = a.size(-2), ac = a.size(-1), br = b.size(-2), bc = b.size(-1);
  const int64_t m = trans_a ? ac : ar, k = trans_a ? ar : ac, n = trans_b ? br : bc;
  const int64_t batch = a.numel() / std::max<int64_t>(ar * ac, 1);
  const bool shared = b.dim() == 2;
  std::vector<double> out(static_cast<size_t>(batch * m * n), 0.0);
  for (int64_t bi = 0; bi < batch; ++bi) {
    const double* pa = av.data() + bi * ar * ac;
    const double* pb = bv.data() + (shared ? 0 : bi) * br * bc;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double x = trans_a ? pa[p * ac + i] : pa[i * ac + p];
          const double y = trans_b ? pb[j * bc + p] : pb[p * bc + j];
          acc += x * y;
        }
        out[static_cast<size_t>((bi * m + i) * n + j)] = acc;
      }
    }
  }
  return out;
}

// y = x w^T + bias by the definition; x [..., in], w [out, in].
std::vector<double> reference_linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  const std::vector<double> xv = x.to_doubles(), wv = w.to_doubles();
  const std::vector<double> bv = bias.defined() ? bias.to_doubles() : std::vector<double>();
  const int64_t in = w.size(1), out = w.size(0), rows = x.numel() / in;
  std::vector<double> y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = bias.defined() ? bv[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += xv[r * in + i] * wv[o * in + i];
      y[static_cast<size_t>(r * out + o)] = acc;
    }
  }
  return y;
}

Shape matrix_shape(Shape batch, int64_t rows, int64_t cols, bool transposed) {
  batch.push_back(transposed ? cols : rows);
  batch.push_back(transposed ? rows : cols);
  return batch;
}

struct MatmulCase {
  Shape batch;
  bool shared_b;
};

TEST(Matmul, EveryTransposeBatchedAndSharedMatchesLoops) {
  Generator gen(11);
  const int64_t m = 5, k = 7, n = 3;
  const MatmulCase cases[] = {
      {{}, true}, {{3}, true}, {{3}, false}, {{2, 3}, true}, {{2, 3}, false}};
  for (DType dtype : {DType::F64, DType::F32}) {
    const double tol = dtype == DType::F64 ? 1e-12 : 1e-5;
    for (const MatmulCase& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << dtype_name(dtype) << " batch " << shape_str(c.batch) << " shared "
                       << c.shared_b << " ta " << ta << " tb " << tb);
          Tensor a = Tensor::randn(matrix_shape(c.batch, m, k, ta), gen, dtype);
          Tensor b =
              Tensor::randn(matrix_shape(c.shared_b ? Shape{} : c.batch, k, n, tb), gen, dtype);
          Tensor y = ops::matmul(a, b, ta, tb);
          ASSERT_EQ(y.shape(), matrix_shape(c.batch, m, n, false));
          EXPECT_EQ(y.dtype(), dtype);
          EXPECT_TRUE(all_close(y.to_doubles(), reference_matmul(a, b, ta, tb), tol, tol));
        }
      }
    }
  }
}

TEST(Matmul, StridedViewsMatchLoops) {
  Generator gen(12);
  // A transposed view with trans_a: op(a) is a contiguous matrix again.
  Tensor base = randn64({4, 5, 7}, gen);
  Tensor b = randn64({7, 3}, gen);
  Tensor at = base.transpose(1, 2);  // [4, 7, 5], non-contiguous
  EXPECT_TRUE(all_close(ops::matmul(at, b, true, false).to_doubles(),
                        reference_matmul(at, b, true, false), 1e-12, 1e-12));
  // A batch that does not fold into rows (permuted batch dim) with shared b.
  Tensor permuted = randn64({5, 4, 7}, gen).permute({1, 0, 2});  // [4, 5, 7]
  Tensor b2 = randn64({7, 3}, gen);
  EXPECT_TRUE(all_close(ops::matmul(permuted, b2).to_doubles(),
                        reference_matmul(permuted, b2, false, false), 1e-12, 1e-12));
  // Row and column slices: a strided leading dimension BLAS reads in place,
  // and a column step BLAS cannot address at all (copied first).
  Tensor rows = randn64({9, 11}, gen).slice(1, 2, 9);       // [9, 7], ld 11
  Tensor stepped = randn64({7, 8}, gen).slice(1, 0, 8, 2);  // [7, 4], column stride 2
  EXPECT_TRUE(all_close(ops::matmul(rows, stepped).to_doubles(),
                        reference_matmul(rows, stepped, false, false), 1e-12, 1e-12));
  // Batched b given as a transposed view, used with trans_b.
  Tensor a3 = randn64({2, 3, 6}, gen);
  Tensor b3 = randn64({2, 6, 5}, gen).transpose(1, 2);  // [2, 5, 6]
  EXPECT_TRUE(all_close(ops::matmul(a3, b3, false, true).to_doubles(),
                        reference_matmul(a3, b3, false, true), 1e-12, 1e-12));
  // A broadcast (stride 0) batch.
  Tensor expanded = randn64({1, 3, 6}, gen).expand({4, 3, 6});
  Tensor b4 = randn64({6, 2}, gen);
  EXPECT_TRUE(all_close(ops::matmul(expanded, b4).to_doubles(),
                        reference_matmul(expanded, b4, false, false), 1e-12, 1e-12));
}

TEST(Matmul, HalfInputsRoundTheF32Result) {
  Generator gen(13);
  for (DType half : {DType::BF16, DType::F16}) {
    for (bool tb : {false, true}) {
      Tensor a = Tensor::randn({2, 5, 9}, gen, half);
      Tensor b = Tensor::randn(tb ? Shape{4, 9} : Shape{9, 4}, gen, half);
      Tensor y = ops::matmul(a, b, false, tb);
      EXPECT_EQ(y.dtype(), half);
      // The inputs are exact in f64, and the f32 product is far closer than
      // one rounding of the output: the error is that rounding alone
      // (2^-9 relative for bf16, 2^-12 for f16), so 2^-8 relative bounds it.
      EXPECT_TRUE(all_close(y.to_doubles(), reference_matmul(a, b, false, tb), 1e-6, 1.0 / 256));
    }
  }
}

TEST(Matmul, EmptyInnerSizeGivesZerosAndBadShapesThrow) {
  Tensor a = Tensor::zeros({2, 3, 0}, DType::F32), b = Tensor::zeros({0, 4}, DType::F32);
  Tensor y = ops::matmul(a, b);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  for (double v : y.to_doubles()) EXPECT_EQ(v, 0.0);
  Generator gen(14);
  EXPECT_THROW(ops::matmul(randn64({3, 4}, gen), randn64({5, 2}, gen)), Error);
  EXPECT_THROW(ops::matmul(randn64({2, 3, 4}, gen), randn64({3, 4, 2}, gen)), Error);
  EXPECT_THROW(ops::matmul(randn64({3, 4}, gen), randn64({4, 2}, gen).to(DType::F32)), Error);
  EXPECT_THROW(ops::matmul(randn64({4}, gen), randn64({4, 2}, gen)), Error);
}

TEST(Linear, WithAndWithoutBiasMatchesLoops) {
  Generator gen(15);
  Tensor w = randn64({7, 5}, gen), bias = randn64({7}, gen);
  for (const Shape& xs : {Shape{5}, Shape{3, 5}, Shape{2, 3, 5}}) {
    Tensor x = randn64(xs, gen);
    Shape ys = xs;
    ys.back() = 7;
    Tensor y = ops::linear(x, w, bias);
    ASSERT_EQ(y.shape(), ys);
    EXPECT_TRUE(all_close(y.to_doubles(), reference_linear(x, w, bias), 1e-12, 1e-12));
    Tensor y0 = ops::linear(x, w);
    EXPECT_TRUE(all_close(y0.to_doubles(), reference_linear(x, w, Tensor()), 1e-12, 1e-12));
  }
  // Strided x, and bf16 against the loops on the same rounded values.
  Tensor xt = randn64({5, 4}, gen).transpose(0, 1);  // [4, 5]
  EXPECT_TRUE(all_close(ops::linear(xt, w, bias).to_doubles(), reference_linear(xt, w, bias), 1e-12,
                        1e-12));
  Tensor xh = Tensor::randn({3, 5}, gen, DType::BF16), wh = w.to(DType::BF16),
         bh = bias.to(DType::BF16);
  Tensor yh = ops::linear(xh, wh, bh);
  EXPECT_EQ(yh.dtype(), DType::BF16);
  EXPECT_TRUE(all_close(yh.to_doubles(), reference_linear(xh, wh, bh), 1e-6, 1.0 / 256));
  EXPECT_THROW(ops::linear(randn64({3, 4}, gen), w), Error);
  EXPECT_THROW(ops::linear(randn64({3, 5}, gen), w, randn64({5}, gen)), Error);
}

TEST(Linear, WeightGradSumOverRowChunksMatchesLoops) {
  Generator gen(21);
  const int64_t rows = 16, out = 6, in = 9;
  const int64_t chunk_rows[] = {5, 7, 4};
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor g = Tensor::randn({rows, out}, gen, dtype), x = Tensor::randn({rows, in}, gen, dtype);
    // sum over all rows r of g[r, o] * x[r, i], in float64 from the same values.
    const std::vector<double> gv = g.to_doubles(), xv = x.to_doubles();
    std::vector<double> expected(static_cast<size_t>(out * in), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) expected[o * in + i] += gv[r * out + o] * xv[r * in + i];
    Tensor sum;
    void* data = nullptr;
    int64_t start = 0;
    for (int64_t n : chunk_rows) {
      sum = ops::linear_weight_grad_sum(g.slice(0, start, start + n), x.slice(0, start, start + n),
                                        sum);
      if (data == nullptr) data = sum.data_ptr();
      EXPECT_EQ(sum.data_ptr(), data);  // added into the running sum, not a new tensor
      start += n;
    }
    // Half precision sums in f32 on the CPU.
    EXPECT_EQ(sum.dtype(), DType::F32);
    ASSERT_EQ(sum.shape(), (Shape{out, in}));
    EXPECT_TRUE(all_close(sum.to_doubles(), expected, 1e-5, 1e-5));
  }
}

TEST(Linear, WeightGradSumRefusesABadRunningSum) {
  Generator gen(22);
  Tensor g = Tensor::randn({4, 6}, gen), x = Tensor::randn({4, 9}, gen);
  const auto message = [&](const Tensor& grad_out, const Tensor& input, const Tensor& sum) {
    return error_of([&] { ops::linear_weight_grad_sum(grad_out, input, sum); });
  };
  EXPECT_THAT(
      message(g, x, Tensor::zeros({9, 6})),
      ::testing::AllOf(::testing::HasSubstr("the running sum"), ::testing::HasSubstr("[6, 9]")));
  EXPECT_THAT(
      message(g, x, Tensor::zeros({6, 9}, DType::F64)),
      ::testing::AllOf(::testing::HasSubstr("the running sum"), ::testing::HasSubstr("f32")));
  // bf16 inputs sum in f32 on the CPU: a bf16 running sum is refused.
  EXPECT_THAT(message(g.to(DType::BF16), x.to(DType::BF16), Tensor::zeros({6, 9}, DType::BF16)),
              ::testing::HasSubstr("the running sum"));
  EXPECT_THAT(message(g, x, Tensor::zeros({9, 6}).transpose(0, 1)),
              ::testing::HasSubstr("must be a contiguous"));
  EXPECT_THAT(message(g, Tensor::randn({5, 9}, gen), Tensor()),
              ::testing::HasSubstr("does not fit x"));
}

TEST(MatmulGrad, EveryTransposeBatchedAndShared) {
  Generator gen(16);
  const int64_t m = 3, k = 4, n = 2;
  const MatmulCase cases[] = {{{}, true}, {{2}, true}, {{2}, false}};
  for (const MatmulCase& c : cases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "batch " << shape_str(c.batch) << " shared "
                                          << c.shared_b << " ta " << ta << " tb " << tb);
        Tensor a = randn64(matrix_shape(c.batch, m, k, ta), gen);
        Tensor b = randn64(matrix_shape(c.shared_b ? Shape{} : c.batch, k, n, tb), gen);
        EXPECT_TRUE(gradcheck([ta, tb](auto& x) { return matmul(x[0], x[1], ta, tb); }, {a, b}));
      }
    }
  }
}

TEST(MatmulGrad, StridedViews) {
  Generator gen(20);
  // A batch that does not fold into rows, so the shared b's gradient sums
  // the batch product by product; and a transposed view used with trans_a.
  Tensor a = randn64({3, 2, 4}, gen), b = randn64({4, 5}, gen);
  EXPECT_TRUE(gradcheck([](auto& x) { return matmul(permute(x[0], {1, 0, 2}), x[1]); }, {a, b}));
  EXPECT_TRUE(
      gradcheck([](auto& x) { return matmul(transpose(x[0], 1, 2), x[1], true, false); }, {a, b}));
}

TEST(MatmulGrad, OnlyTheInputsThatRequireGradGetOne) {
  Generator gen(17);
  Tensor a = randn64({2, 3, 4}, gen), b = randn64({4, 5}, gen);
  a.set_requires_grad(true);
  backward(sum(matmul(a, b)));
  EXPECT_FALSE(b.grad().defined());
  // d sum(a b) / d a[.., i, p] = sum_j b[p, j].
  const std::vector<double> bv = b.to_doubles(), ga = a.grad().to_doubles();
  for (int64_t row = 0; row < 6; ++row) {
    for (int64_t p = 0; p < 4; ++p) {
      double expected = 0;
      for (int64_t j = 0; j < 5; ++j) expected += bv[p * 5 + j];
      EXPECT_NEAR(ga[row * 4 + p], expected, 1e-12);
    }
  }
}

TEST(LinearGrad, WithAndWithoutBias) {
  Generator gen(18);
  Tensor w = randn64({3, 4}, gen), bias = randn64({3}, gen);
  for (const Shape& xs : {Shape{4}, Shape{2, 4}, Shape{2, 3, 4}}) {
    SCOPED_TRACE(shape_str(xs));
    Tensor x = randn64(xs, gen);
    EXPECT_TRUE(gradcheck([](auto& v) { return linear(v[0], v[1], v[2]); }, {x, w, bias}));
    EXPECT_TRUE(gradcheck([](auto& v) { return linear(v[0], v[1]); }, {x, w}));
  }
}

TEST(LinearGrad, HalfGradientsKeepTheParameterDtype) {
  Generator gen(19);
  Tensor x = Tensor::randn({2, 4}, gen, DType::BF16), w = Tensor::randn({3, 4}, gen, DType::BF16);
  Tensor bias = Tensor::randn({3}, gen, DType::BF16);
  Tensor g = Tensor::randn({2, 3}, gen, DType::BF16);
  ops::LinearGrads grads = ops::linear_backward(g, x, w, true, true, true);
  EXPECT_EQ(grads.x.dtype(), DType::BF16);
  EXPECT_EQ(grads.weight.dtype(), DType::BF16);
  EXPECT_EQ(grads.bias.dtype(), DType::BF16);
  // dW = g^T x and db = sum of g's rows, against loops on the same values.
  const std::vector<double> gv = g.to_doubles(), xv = x.to_doubles();
  std::vector<double> dw(12, 0.0), db(3, 0.0);
  for (int r = 0; r < 2; ++r) {
    for (int o = 0; o < 3; ++o) {
      db[o] += gv[r * 3 + o];
      for (int i = 0; i < 4; ++i) dw[o * 4 + i] += gv[r * 3 + o] * xv[r * 4 + i];
    }
  }
  EXPECT_TRUE(all_close(grads.weight.to_doubles(), dw, 1e-6, 1.0 / 256));
  EXPECT_TRUE(all_close(grads.bias.to_doubles(), db, 1e-6, 1.0 / 256));
}

}  // namespace
}  // namespace lt
