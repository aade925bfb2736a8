// Rotary embedding: frequencies (default and "llama3") against formulas
// written here and hand-computed values, the rotation against Hugging
// Face's x * cos + rotate_half(x) * sin, gradients against central
// differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "ops/rope.h"
#include "support/errors.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::randn64;

using testing::error_of;

// transformers' _compute_llama3_parameters, transcribed with its where()s.
std::vector<double> llama3_ref(int64_t dim, double base, double factor, double low, double high,
                               double old_context) {
  std::vector<double> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const double inv = 1.0 / std::pow(base, static_cast<double>(i) / dim);
    const double wavelen = 2 * std::numbers::pi / inv;
    const double low_freq_wavelen = old_context / low, high_freq_wavelen = old_context / high;
    double llama = wavelen > low_freq_wavelen ? inv / factor : inv;
    const double smooth = (old_context / wavelen - low) / (high - low);
    const double smoothed = (1 - smooth) * llama / factor + smooth * llama;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    out.push_back(medium ? smoothed : llama);
  }
  return out;
}

// y = x * cat(cos, cos) + rotate_half(x) * cat(sin, sin), rotate_half(x) =
// cat(-x2, x1), per [B, T, H, D] head vector, at `pos[b][t]`.
std::vector<double> rotary_ref(const Tensor& x, const std::vector<double>& inv_freq,
                               const std::vector<std::vector<int64_t>>& pos) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3), h2 = D / 2;
  auto xv = x.to_doubles();
  std::vector<double> y(xv.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        const double* xr = xv.data() + ((b * T + t) * H + h) * D;
        double* yr = y.data() + ((b * T + t) * H + h) * D;
        for (int64_t j = 0; j < D; ++j) {
          const double angle = static_cast<double>(pos[b][t]) * inv_freq[j % h2];
          const double rot = j < h2 ? -xr[j + h2] : xr[j - h2];
          yr[j] = xr[j] * std::cos(angle) + rot * std::sin(angle);
        }
      }
  return y;
}

std::vector<std::vector<int64_t>> iota_positions(int64_t B, int64_t T) {
  std::vector<std::vector<int64_t>> p(B, std::vector<int64_t>(T));
  for (auto& row : p)
    for (int64_t t = 0; t < T; ++t) row[t] = t;
  return p;
}

TEST(Rope, DefaultInverseFrequenciesHandValues) {
  // theta = 10000, D = 8: 10000^(-2i/8) = 10^-i.
  auto f = ops::rope_inv_freq(8, 10000.0);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_TRUE(all_close(f, {1.0, 0.1, 0.01, 0.001}, 0, 1e-15));
  // D = 6, theta = 64: 64^(-i/3) = 4^-i.
  EXPECT_TRUE(all_close(ops::rope_inv_freq(6, 64.0), {1.0, 0.25, 0.0625}, 0, 1e-15));
  EXPECT_THROW(ops::rope_inv_freq(7, 10000.0), Error);
}

TEST(Rope, Llama3ScalingHandValues) {
  // D = 8, theta = 10000 -> inv_freq 1, 0.1, 0.01, 0.001; wavelengths
  // 2pi/f = 6.28, 62.8, 628.3, 6283. With original_max 1000, low 1, high 4:
  // keep below 250, divide by 8 above 1000, blend in between.
  auto f = ops::rope_llama3_scaling(ops::rope_inv_freq(8, 10000.0), 8.0, 1.0, 4.0, 1000);
  // 628.3: smooth = (1000 / 628.3185 - 1) / 3 = 0.19718314363965117,
  // f = 0.01 * ((1 - smooth) / 8 + smooth).
  EXPECT_TRUE(all_close(f, {1.0, 0.1, 0.0029753525068469478, 0.001 / 8}, 0, 1e-14));
}

TEST(Rope, Llama3ScalingMatchesTransformersFormula) {
  // Llama 3.1's config: head_dim 128, theta 500000, factor 8, low 1, high 4,
  // original_max_position_embeddings 8192; plus a second set for head_dim 6.
  EXPECT_TRUE(all_close(ops::rope_llama3_scaling(ops::rope_inv_freq(128, 500000.0), 8, 1, 4, 8192),
                        llama3_ref(128, 500000.0, 8, 1, 4, 8192), 0, 1e-14));
  EXPECT_TRUE(all_close(ops::rope_llama3_scaling(ops::rope_inv_freq(6, 100.0), 4, 2, 8, 20),
                        llama3_ref(6, 100.0, 4, 2, 8, 20), 0, 1e-14));
  // The three bands are all exercised by the Llama 3.1 set.
  auto f = ops::rope_llama3_scaling(ops::rope_inv_freq(128, 500000.0), 8, 1, 4, 8192);
  auto base = ops::rope_inv_freq(128, 500000.0);
  EXPECT_EQ(f[0], base[0]);
  EXPECT_NEAR(f[63], base[63] / 8, 1e-20);
  int blended = 0;
  for (size_t i = 0; i < f.size(); ++i) blended += f[i] != base[i] && f[i] != base[i] / 8;
  EXPECT_GT(blended, 0);
  EXPECT_THROW(ops::rope_llama3_scaling(base, 8, 4, 1, 8192), Error);
}

TEST(Rope, TablesAreCosAndSinOfPositionTimesFrequency) {
  RopeScaling scaling;
  scaling.type = "llama3";
  scaling.factor = 4;
  scaling.original_max_position_embeddings = 20;
  RopeTable table = make_rope_table(6, 9, 100.0, scaling);
  ASSERT_EQ(table.cos.shape(), (Shape{9, 3}));
  EXPECT_EQ(table.cos.dtype(), DType::F64);
  EXPECT_EQ(table.head_dim, 6);
  auto f = llama3_ref(6, 100.0, 4, 1, 4, 20);
  auto cv = table.cos.to_doubles(), sv = table.sin.to_doubles();
  for (int p = 0; p < 9; ++p)
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(cv[p * 3 + i], std::cos(p * f[i]), 1e-15);
      EXPECT_NEAR(sv[p * 3 + i], std::sin(p * f[i]), 1e-15);
    }
  scaling.type = "yarn";
  EXPECT_THAT(error_of([&] { make_rope_table(6, 9, 100.0, scaling); }),
              ::testing::HasSubstr("yarn"));
}

TEST(Rope, RotationMatchesRotateHalfFormula) {
  Generator gen(41);
  struct Case {
    int64_t D;
    bool llama3;
  };
  for (Case c : {Case{8, false}, Case{8, true}, Case{6, false}, Case{6, true}}) {
    RopeScaling scaling;
    if (c.llama3) {
      scaling.type = "llama3";
      scaling.factor = 8;
      scaling.original_max_position_embeddings = 16;
    }
    const double theta = 10000.0;
    RopeTable table = make_rope_table(c.D, 32, theta, scaling);
    std::vector<double> f(static_cast<size_t>(c.D / 2));
    for (int64_t i = 0; i < c.D / 2; ++i) f[i] = std::pow(theta, -2.0 * i / c.D);
    if (c.llama3) f = llama3_ref(c.D, theta, 8, 1, 4, 16);
    Tensor x = randn64({2, 5, 3, c.D}, gen);
    Tensor y = rotary_embedding(x, table);
    EXPECT_EQ(y.shape(), x.shape());
    EXPECT_TRUE(all_close(y.to_doubles(), rotary_ref(x, f, iota_positions(2, 5)), 1e-12, 0))
        << "D " << c.D << " llama3 " << c.llama3;

    // Explicit positions, shared [T] and per-sequence [B, T].
    Tensor pt = Tensor::from_vector<int64_t>({3, 0, 31, 7, 7}, {5});
    std::vector<std::vector<int64_t>> pref = {{3, 0, 31, 7, 7}, {3, 0, 31, 7, 7}};
    EXPECT_TRUE(
        all_close(rotary_embedding(x, table, pt).to_doubles(), rotary_ref(x, f, pref), 1e-12, 0));
    Tensor pbt = Tensor::from_vector<int32_t>({0, 1, 2, 0, 1, 9, 10, 11, 12, 13}, {2, 5});
    std::vector<std::vector<int64_t>> pbref = {{0, 1, 2, 0, 1}, {9, 10, 11, 12, 13}};
    EXPECT_TRUE(
        all_close(rotary_embedding(x, table, pbt).to_doubles(), rotary_ref(x, f, pbref), 1e-12, 0));

    // f32 computes in f32 against the f64 formula.
    Tensor y32 = rotary_embedding(x.to(DType::F32), table);
    EXPECT_EQ(y32.dtype(), DType::F32);
    EXPECT_TRUE(all_close(y32.to_doubles(),
                          rotary_ref(x.to(DType::F32).to(DType::F64), f, iota_positions(2, 5)),
                          1e-6, 1e-6));
  }
}

TEST(Rope, RejectsBadShapesAndPositions) {
  RopeTable table = make_rope_table(8, 4, 10000.0);
  Tensor x = Tensor::zeros({1, 3, 2, 8}, DType::F32);
  Tensor late = Tensor::from_vector<int64_t>({0, 1, 4}, {3});
  std::string msg = error_of([&] { rotary_embedding(x, table, late); });
  EXPECT_THAT(msg, ::testing::HasSubstr("position 4"));
  EXPECT_THAT(msg, ::testing::HasSubstr("[0, 4)"));
  // Without explicit positions, T = 5 runs off a 4-row table.
  EXPECT_THROW(rotary_embedding(Tensor::zeros({1, 5, 2, 8}, DType::F32), table), Error);
  EXPECT_THROW(rotary_embedding(Tensor::zeros({1, 3, 2, 6}, DType::F32), table), Error);
  EXPECT_THROW(rotary_embedding(Tensor::zeros({3, 2, 8}, DType::F32), table), Error);
}

TEST(RopeGrad, XMatchesFiniteDifferences) {
  Generator gen(42);
  RopeScaling scaling;
  scaling.type = "llama3";
  scaling.factor = 8;
  scaling.original_max_position_embeddings = 16;
  for (int64_t D : {8, 6}) {
    RopeTable table = make_rope_table(D, 40, 10000.0, scaling);
    Tensor x = randn64({2, 3, 2, D}, gen);
    EXPECT_TRUE(gradcheck([&](auto& t) { return rotary_embedding(t[0], table); }, {x}));
    Tensor pos = Tensor::from_vector<int64_t>({5, 39, 17}, {3});
    EXPECT_TRUE(gradcheck([&](auto& t) { return rotary_embedding(t[0], table, t[1]); }, {x, pos}));
    // Through a transposed (non-contiguous) input, as q often is.
    Tensor xt = randn64({2, 2, 3, D}, gen);
    EXPECT_TRUE(
        gradcheck([&](auto& t) { return rotary_embedding(transpose(t[0], 1, 2), table); }, {xt}));
  }
}

TEST(RopeGrad, Bf16KeepsDtypeAndTracksF64) {
  Generator gen(43);
  RopeTable table = make_rope_table(8, 16, 10000.0);
  Tensor x = randn64({1, 16, 2, 8}, gen);
  Tensor xb = x.to(DType::BF16);
  xb.set_requires_grad(true);
  Tensor y = rotary_embedding(xb, table);
  EXPECT_EQ(y.dtype(), DType::BF16);
  EXPECT_LT(testing::relative_error_norm(y.to_doubles(), rotary_embedding(x, table).to_doubles()),
            1e-2);
  Tensor g = randn64({1, 16, 2, 8}, gen);
  backward(y, g.to(DType::BF16));
  EXPECT_EQ(xb.grad().dtype(), DType::BF16);
  // Rotation is orthogonal: the gradient is g rotated back, same norm.
  Tensor back = ops::rotary_backward(g, table.cos, table.sin);
  EXPECT_LT(testing::relative_error_norm(xb.grad().to_doubles(), back.to_doubles()), 1e-2);
  double ng = 0, nb = 0;
  for (double v : g.to_doubles()) ng += v * v;
  for (double v : back.to_doubles()) nb += v * v;
  EXPECT_NEAR(ng, nb, 1e-10 * ng);
}

TEST(Rope, LargeShapesRunInParallelAndMatchTheFormula) {
  // 2 x 600 tokens of 4 heads: several chunks of tokens and of table rows.
  Generator gen(44);
  RopeTable table = make_rope_table(8, 600, 10000.0);
  std::vector<double> f = {1.0, 0.1, 0.01, 0.001};
  Tensor x = randn64({2, 600, 4, 8}, gen);
  EXPECT_TRUE(all_close(rotary_embedding(x, table).to_doubles(),
                        rotary_ref(x, f, iota_positions(2, 600)), 1e-12, 0));
}

}  // namespace
}  // namespace lt
