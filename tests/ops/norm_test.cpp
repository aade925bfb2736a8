// RMSNorm and LayerNorm: forward against float64 formulas written here,
// bf16 against Hugging Face's fp32-then-round recipe, gradients against
// central differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "ops/norm.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::randn64;

// Naive float64 references over the last dim of a row-major [rows, C] buffer.
std::vector<double> rms_ref(const std::vector<double>& x, const std::vector<double>& w,
                            double eps) {
  const size_t C = w.size(), rows = x.size() / C;
  std::vector<double> y(x.size());
  for (size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (size_t c = 0; c < C; ++c) ss += x[r * C + c] * x[r * C + c];
    const double inv = 1.0 / std::sqrt(ss / C + eps);
    for (size_t c = 0; c < C; ++c) y[r * C + c] = w[c] * (x[r * C + c] * inv);
  }
  return y;
}

std::vector<double> layer_ref(const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>& b, double eps) {
  const size_t C = w.size(), rows = x.size() / C;
  std::vector<double> y(x.size());
  for (size_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (size_t c = 0; c < C; ++c) m += x[r * C + c];
    m /= C;
    for (size_t c = 0; c < C; ++c) v += (x[r * C + c] - m) * (x[r * C + c] - m);
    v /= C;  // biased, as torch.nn.LayerNorm
    for (size_t c = 0; c < C; ++c) {
      y[r * C + c] = (x[r * C + c] - m) / std::sqrt(v + eps) * w[c] + (b.empty() ? 0 : b[c]);
    }
  }
  return y;
}

float round_bf16(float v) {
  return bf16_to_f32(f32_to_bf16(v));
}

TEST(RmsNorm, ForwardMatchesFloat64Formula) {
  Generator gen(21);
  for (const Shape& shape : {Shape{7, 13}, Shape{2, 3, 13}, Shape{1}}) {
    const int64_t C = shape.back();
    Tensor x = randn64(shape, gen, 3.0);
    Tensor w = randn64({C}, gen);
    auto out = ops::rms_norm(x, w, 1e-5);
    ASSERT_EQ(out.y.shape(), shape);
    EXPECT_EQ(out.y.dtype(), DType::F64);
    EXPECT_TRUE(
        all_close(out.y.to_doubles(), rms_ref(x.to_doubles(), w.to_doubles(), 1e-5), 1e-12, 1e-12));
    // f32 computes in f32: close to the f64 formula at f32 precision.
    auto y32 = ops::rms_norm(x.to(DType::F32), w.to(DType::F32), 1e-5).y;
    EXPECT_EQ(y32.dtype(), DType::F32);
    EXPECT_TRUE(all_close(
        y32.to_doubles(),
        rms_ref(x.to(DType::F32).to_doubles(), w.to(DType::F32).to_doubles(), 1e-5), 1e-6, 1e-5));
  }
}

TEST(RmsNorm, EpsMattersForSmallRows) {
  // A row of all 1e-3: mean(x^2) = 1e-6, so with eps = 1e-6 the scale is
  // 1 / sqrt(2e-6), not 1 / 1e-3.
  Tensor x = Tensor::full({1, 4}, 1e-3, DType::F64);
  Tensor w = Tensor::full({4}, 1.0, DType::F64);
  auto y = ops::rms_norm(x, w, 1e-6).y.to_doubles();
  EXPECT_NEAR(y[0], 1e-3 / std::sqrt(2e-6), 1e-12);
}

TEST(RmsNorm, Bf16FollowsHuggingFaceRounding) {
  // LlamaRMSNorm for bf16: variance and rsqrt in fp32, x * rsqrt rounded to
  // bf16, then weight * that rounded to bf16. Written here in float.
  Generator gen(22);
  const int64_t rows = 31, C = 67;
  Tensor x = randn64({rows, C}, gen, 2.0).to(DType::BF16);
  Tensor w = Tensor::uniform({C}, gen, 0.5, 1.5, DType::F64).to(DType::BF16);
  Tensor y = ops::rms_norm(x, w, 1e-6).y;
  EXPECT_EQ(y.dtype(), DType::BF16);
  auto xv = x.to_doubles(), wv = w.to_doubles(), yv = y.to_doubles();
  int exact = 0, single_rounding_exact = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) ss += xv[r * C + c] * xv[r * C + c];
    const float var = static_cast<float>(ss / C);
    const float inv = 1.0f / std::sqrt(var + 1e-6f);
    for (int64_t c = 0; c < C; ++c) {
      const float n = round_bf16(static_cast<float>(xv[r * C + c]) * inv);
      const float hf = round_bf16(static_cast<float>(wv[c]) * n);
      const float single =
          round_bf16(static_cast<float>(wv[c]) * static_cast<float>(xv[r * C + c]) * inv);
      const double got = yv[r * C + c];
      exact += got == hf;
      single_rounding_exact += got == single;
      // Never more than one bf16 step (2^-8 relative) from the recipe.
      EXPECT_LE(std::abs(got - hf), std::abs(hf) * 0x1p-7 + 1e-30) << r << "," << c;
    }
  }
  // torch's reduction order may flip a rare tie; anything else is a bug.
  EXPECT_GE(exact, static_cast<int>(rows * C * 0.99));
  // The double rounding is observable: one rounding would differ often.
  EXPECT_LT(single_rounding_exact, exact);
}

TEST(RmsNorm, RejectsMismatchedWeight) {
  Tensor x = Tensor::zeros({2, 5}, DType::F32);
  EXPECT_THROW(ops::rms_norm(x, Tensor::zeros({4}, DType::F32), 1e-5), Error);
  EXPECT_THROW(ops::rms_norm(x, Tensor::zeros({5}, DType::F64), 1e-5), Error);
}

TEST(RmsNormGrad, XAndWeightMatchFiniteDifferences) {
  Generator gen(23);
  Tensor x = randn64({3, 2, 13}, gen, 2.0);
  Tensor w = randn64({13}, gen);
  EXPECT_TRUE(gradcheck([](auto& t) { return rms_norm(t[0], t[1], 1e-5); }, {x, w}));
  // A non-contiguous x (a transposed view) and a gradient from a later op.
  Tensor xt = randn64({13, 7}, gen);
  EXPECT_TRUE(
      gradcheck([](auto& t) { return mul(rms_norm(transpose(t[0], 0, 1), t[1], 0.1), t[2]); },
                {xt, w, randn64({7, 13}, gen)}));
}

TEST(RmsNormGrad, SkipsInputsThatDoNotRequireGrad) {
  Generator gen(24);
  Tensor x = randn64({5, 9}, gen);
  Tensor w = randn64({9}, gen);
  x.set_requires_grad(true);
  backward(sum(rms_norm(x, w, 1e-5)));
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  EXPECT_FALSE(rms_norm(w.reshape({1, 9}), w, 1e-5).requires_grad());
}

TEST(RmsNormGrad, Bf16GradientsTrackTheF64Ones) {
  Generator gen(25);
  Tensor x = randn64({7, 13}, gen);
  Tensor w = randn64({13}, gen);
  Tensor dy = randn64({7, 13}, gen);
  auto out = ops::rms_norm(x, w, 1e-5);
  auto ref = ops::rms_norm_backward(dy, x, w, out.rstd, true, true);
  Tensor xb = x.to(DType::BF16), wb = w.to(DType::BF16);
  auto outb = ops::rms_norm(xb, wb, 1e-5);
  EXPECT_EQ(outb.rstd.dtype(), DType::F32);
  auto gb = ops::rms_norm_backward(dy.to(DType::BF16), xb, wb, outb.rstd, true, true);
  EXPECT_EQ(gb.dx.dtype(), DType::BF16);
  EXPECT_EQ(gb.dweight.dtype(), DType::BF16);
  EXPECT_LT(testing::relative_error_norm(gb.dx.to_doubles(), ref.dx.to_doubles()), 2e-2);
  EXPECT_LT(testing::relative_error_norm(gb.dweight.to_doubles(), ref.dweight.to_doubles()), 2e-2);
}

TEST(LayerNorm, ForwardMatchesFloat64Formula) {
  Generator gen(31);
  for (const Shape& shape : {Shape{7, 13}, Shape{2, 3, 13}}) {
    const int64_t C = shape.back();
    // An offset mean checks the variance is not E[x^2] - E[x]^2.
    Tensor x = add(randn64(shape, gen), Tensor::full(shape, 100.0, DType::F64));
    Tensor w = randn64({C}, gen), b = randn64({C}, gen);
    auto y = ops::layer_norm(x, w, b, 1e-5).y;
    EXPECT_TRUE(all_close(y.to_doubles(),
                          layer_ref(x.to_doubles(), w.to_doubles(), b.to_doubles(), 1e-5), 1e-10,
                          1e-10));
    auto ynb = ops::layer_norm(x, w, Tensor(), 1e-5).y;
    EXPECT_TRUE(all_close(ynb.to_doubles(), layer_ref(x.to_doubles(), w.to_doubles(), {}, 1e-5),
                          1e-10, 1e-10));
    auto y32 = ops::layer_norm(x.to(DType::F32), w.to(DType::F32), b.to(DType::F32), 1e-5).y;
    EXPECT_TRUE(all_close(y32.to_doubles(),
                          layer_ref(x.to(DType::F32).to_doubles(), w.to(DType::F32).to_doubles(),
                                    b.to(DType::F32).to_doubles(), 1e-5),
                          1e-5, 1e-5));
  }
}

TEST(LayerNorm, Bf16RoundsOnceFromF32) {
  Generator gen(32);
  const int64_t C = 13;
  Tensor x = randn64({7, C}, gen).to(DType::BF16);
  Tensor w = randn64({C}, gen).to(DType::BF16), b = randn64({C}, gen).to(DType::BF16);
  Tensor y = ops::layer_norm(x, w, b, 1e-5).y;
  EXPECT_EQ(y.dtype(), DType::BF16);
  auto ref = layer_ref(x.to_doubles(), w.to_doubles(), b.to_doubles(), 1e-5);
  auto yv = y.to_doubles();
  for (size_t i = 0; i < ref.size(); ++i) {
    // Within half a bf16 step of the exact value, plus f32 slack.
    EXPECT_LE(std::abs(yv[i] - ref[i]), std::abs(ref[i]) * 0x1p-8 * 1.01 + 1e-6) << i;
  }
}

TEST(LayerNormGrad, XWeightAndBiasMatchFiniteDifferences) {
  Generator gen(33);
  Tensor x = randn64({3, 2, 13}, gen, 2.0);
  Tensor w = randn64({13}, gen), b = randn64({13}, gen);
  EXPECT_TRUE(gradcheck([](auto& t) { return layer_norm(t[0], t[1], t[2], 1e-5); }, {x, w, b}));
  EXPECT_TRUE(gradcheck([](auto& t) { return layer_norm(t[0], t[1], Tensor(), 1e-5); }, {x, w}));
  EXPECT_TRUE(gradcheck(
      [](auto& t) { return mul(layer_norm(transpose(t[0], 0, 1), t[1], t[2], 0.1), t[3]); },
      {randn64({13, 7}, gen), w, b, randn64({7, 13}, gen)}));
}

TEST(LayerNormGrad, SkipsInputsThatDoNotRequireGrad) {
  Generator gen(34);
  Tensor x = randn64({5, 9}, gen);
  Tensor w = randn64({9}, gen), b = randn64({9}, gen);
  b.set_requires_grad(true);
  backward(sum(layer_norm(x, w, b, 1e-5)));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  // d sum(y) / d bias = number of rows.
  EXPECT_TRUE(all_close(b.grad().to_doubles(), std::vector<double>(9, 5.0), 0, 0));
}

TEST(NormParallel, LargeShapesMatchFormulasAndRowByRowResults) {
  // 211 x 197 elements: split into several row chunks (forward, dx) and
  // column blocks (dweight, dbias), unlike the small shapes above.
  Generator gen(26);
  const int64_t rows = 211, C = 197;
  Tensor x = randn64({rows, C}, gen), dy = randn64({rows, C}, gen);
  Tensor w = randn64({C}, gen), b = randn64({C}, gen);
  auto xv = x.to_doubles(), gv = dy.to_doubles();
  auto rn = ops::rms_norm(x, w, 1e-5);
  auto ln = ops::layer_norm(x, w, b, 1e-5);
  EXPECT_TRUE(all_close(rn.y.to_doubles(), rms_ref(xv, w.to_doubles(), 1e-5), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(ln.y.to_doubles(), layer_ref(xv, w.to_doubles(), b.to_doubles(), 1e-5),
                        1e-12, 1e-12));
  // By definition, dweight = sum over rows of dy * normalized x (the
  // reference with weight 1 and no bias), and dbias = sum over rows of dy.
  const std::vector<double> ones(static_cast<size_t>(C), 1.0);
  auto n_rms = rms_ref(xv, ones, 1e-5), n_ln = layer_ref(xv, ones, {}, 1e-5);
  std::vector<double> dw_rms(C, 0.0), dw_ln(C, 0.0), db(C, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      dw_rms[c] += gv[r * C + c] * n_rms[r * C + c];
      dw_ln[c] += gv[r * C + c] * n_ln[r * C + c];
      db[c] += gv[r * C + c];
    }
  auto rg = ops::rms_norm_backward(dy, x, w, rn.rstd, true, true);
  auto lg = ops::layer_norm_backward(dy, x, w, ln.mean, ln.rstd, true, true, true);
  EXPECT_TRUE(all_close(rg.dweight.to_doubles(), dw_rms, 1e-10, 1e-10));
  EXPECT_TRUE(all_close(lg.dweight.to_doubles(), dw_ln, 1e-10, 1e-10));
  EXPECT_TRUE(all_close(lg.dbias.to_doubles(), db, 1e-10, 1e-10));
  EXPECT_FALSE(ops::rms_norm_backward(dy, x, w, rn.rstd, false, true).dx.defined());
  // dx of each row alone (one row is never split) equals the chunked result.
  auto rdx = rg.dx.to_doubles(), ldx = lg.dx.to_doubles();
  for (int64_t r = 0; r < rows; ++r) {
    Tensor xr = x.slice(0, r, r + 1), gr = dy.slice(0, r, r + 1);
    auto one_rms = ops::rms_norm_backward(gr, xr, w, rn.rstd.slice(0, r, r + 1), true, false);
    auto one_ln = ops::layer_norm_backward(gr, xr, w, ln.mean.slice(0, r, r + 1),
                                           ln.rstd.slice(0, r, r + 1), true, false, false);
    std::vector<double> want_rms(rdx.begin() + r * C, rdx.begin() + (r + 1) * C);
    std::vector<double> want_ln(ldx.begin() + r * C, ldx.begin() + (r + 1) * C);
    ASSERT_TRUE(all_close(one_rms.dx.to_doubles(), want_rms, 0, 0)) << "row " << r;
    ASSERT_TRUE(all_close(one_ln.dx.to_doubles(), want_ln, 0, 0)) << "row " << r;
  }
}

}  // namespace
}  // namespace lt
