// The 8-bit AdamW update compiled by the fusion compiler
// (optim/compiled_adamw8bit.h) against optim's own block update
// (adamw8bit_update_block, the scalar path that AdamW8bit's SIMD and CUDA
// paths equal bit for bit) and against the update in float64 from the same
// dequantized states. Each step starts both from the same codes and
// scales: the parameters, the bf16 copy, the scales and the codes (near-ties
// of the quantization included: the kernel searches the table exactly)
// must equal optim's bit for bit; float64 checks that the new parameter is the exact update
// within f32 rounding, the scales are the exact absmax, and every code is a
// nearest one of the exact moment.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "compile/compiler_info.h"
#include "optim/adamw8bit_kernel.h"
#include "optim/compiled_adamw8bit.h"
#include "support/adamw8bit_states.h"

namespace lt::optim {
namespace {

using testing::States8bit;

constexpr int64_t kBlock = 256;

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// `rank` is (within 1e-6 of the block scale) a nearest code of `exact`.
bool is_a_nearest_code(const Code8& code, uint8_t rank, double exact) {
  const double d = std::abs(double{code[rank]} - exact);
  for (int other : {rank - 1, rank + 1}) {
    if (other < 0 || other > 255) continue;
    if (std::abs(double{code[static_cast<size_t>(other)]} - exact) + 1e-6 < d) return false;
  }
  return true;
}

class CompiledAdamW8bit : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!compile::compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  }
};

// Three full blocks and a shorter last one (two calls of one kernel), two
// steps with other scalars (the second from the compiled kernel's codes).
TEST_P(CompiledAdamW8bit, EqualsOptimsBlockUpdateAndFloat64) {
  const DType grad_dtype = GetParam();
  const int64_t n = 3 * kBlock + 100;
  States8bit s = testing::random_states_8bit(n, kBlock, 9);
  if (grad_dtype == DType::BF16)
    for (float& g : s.g) g = bf16_to_f32(f32_to_bf16(g));
  compile::KernelCache cache;
  for (int64_t t = 1; t <= 2; ++t) {
    const AdamWScalars sc =
        adamw_scalars(1e-2 * static_cast<double>(t), 0.9, 0.999, 1e-8, 0.1, 0.5, t + 3);
    States8bit ref = s;
    testing::optim_update_8bit(sc, kBlock, grad_dtype, ref);
    const States8bit got = testing::updated_8bit(
        s, grad_dtype, Device::cpu(),
        [&](const Tensor& p, const Tensor& g, const Tensor& mc, const Tensor& ms, const Tensor& vc,
            const Tensor& vs, const Tensor& copy) {
          compiled_adamw8bit_update(cache, sc, kBlock, p, g, mc, ms, vc, vs, copy);
        });
    const int64_t blocks = static_cast<int64_t>(s.m_scales.size());
    const std::vector<float>&p_got = got.p, &m_scale_got = got.m_scales,
          &v_scale_got = got.v_scales;
    const std::vector<uint8_t>&m_got = got.m_codes, &v_got = got.v_codes;

    // float64 from the same dequantized states and the same f32 scalars.
    std::vector<double> m64(static_cast<size_t>(n)), sv64(static_cast<size_t>(n));
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      const size_t b = i / kBlock;
      const double g = double{s.g[i]} * sc.grad_scale;
      const double m = double{signed_code()[s.m_codes[i]]} * s.m_scales[b];
      const double sv = double{unsigned_code()[s.v_codes[i]]} * s.v_scales[b];
      m64[i] = double{sc.beta1} * m + double{sc.one_minus_beta1} * g;
      sv64[i] = std::sqrt(double{sc.beta2} * sv * sv + double{sc.one_minus_beta2} * g * g);
      const double decayed = double{s.p[i]} * sc.decay_factor;
      const double denominator = sv64[i] / sc.bias_correction2_sqrt + sc.eps;
      const double step = sc.neg_step_size * m64[i] / denominator;
      // f32 rounding: of p's terms, of the step, and of m's two terms
      // (which may cancel) carried through the step.
      const double m_terms =
          std::abs(double{sc.beta1} * m) + std::abs(double{sc.one_minus_beta1} * g);
      const double bound = 1e-6 * std::abs(decayed) + 1e-5 * std::abs(step) +
                           1e-6 * std::abs(sc.neg_step_size) * m_terms / denominator;
      ASSERT_NEAR(p_got[i], decayed + step, bound) << "step " << t << " element " << i;
    }
    for (int64_t b = 0; b < blocks; ++b) {
      double m_absmax = 0, sv_absmax = 0;
      for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
        m_absmax = std::max(m_absmax, std::abs(m64[static_cast<size_t>(i)]));
        sv_absmax = std::max(sv_absmax, sv64[static_cast<size_t>(i)]);
      }
      const size_t bi = static_cast<size_t>(b);
      EXPECT_NEAR(m_scale_got[bi], m_absmax, 1e-5 * m_absmax) << "block " << b;
      EXPECT_NEAR(v_scale_got[bi], sv_absmax, 1e-5 * sv_absmax) << "block " << b;
      for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
        const size_t e = static_cast<size_t>(i);
        EXPECT_TRUE(is_a_nearest_code(signed_code(), m_got[e], m64[e] / m_absmax))
            << "m code of element " << i << ": " << int{m_got[e]};
        EXPECT_TRUE(is_a_nearest_code(unsigned_code(), v_got[e], sv64[e] / sv_absmax))
            << "sqrt(v) code of element " << i << ": " << int{v_got[e]};
      }
      // optim's scales, bit for bit.
      EXPECT_EQ(bits(m_scale_got[bi]), bits(ref.m_scales[bi])) << "block " << b;
      EXPECT_EQ(bits(v_scale_got[bi]), bits(ref.v_scales[bi])) << "block " << b;
    }
    // optim's parameters, copy and codes bit for bit.
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      ASSERT_EQ(bits(p_got[i]), bits(ref.p[i])) << "step " << t << " element " << i;
      ASSERT_EQ(got.bf16_copy[i], ref.bf16_copy[i]) << "step " << t << " element " << i;
      ASSERT_EQ(int{m_got[i]}, int{ref.m_codes[i]}) << "m code, step " << t << " element " << i;
      ASSERT_EQ(int{v_got[i]}, int{ref.v_codes[i]})
          << "sqrt(v) code, step " << t << " element " << i;
    }
    s = got;
  }
}

// Every tie and near-tie of both codes: with beta1 = beta2 = 0 the new m
// is the gradient itself and sqrt(v) its magnitude, and one block whose
// absmax is 1 holds each midpoint of two neighbouring codes (of the signed
// code, then of the unsigned one) and the f32 values either side of it.
// The codes must be quantize_nearest's (ties to the smaller magnitude) and
// optim's.
TEST_P(CompiledAdamW8bit, QuantizesTiesAndNearTiesAsQuantizeNearest) {
  const DType grad_dtype = GetParam();
  const int64_t block = 2048;
  States8bit s = testing::random_states_8bit(block, block, 4);
  s.g.assign(static_cast<size_t>(block), 0.0f);
  s.g[0] = 1.0f;
  size_t at = 1;
  for (const Code8* code : {&signed_code(), &unsigned_code()}) {
    for (size_t k = 0; k + 1 < 256; ++k) {
      const float mid = static_cast<float>((double{(*code)[k]} + double{(*code)[k + 1]}) / 2);
      for (float g : {mid, std::nextafter(mid, -2.0f), std::nextafter(mid, 2.0f)}) s.g[at++] = g;
    }
  }
  if (grad_dtype == DType::BF16)
    for (float& g : s.g) g = bf16_to_f32(f32_to_bf16(g));
  const AdamWScalars sc = adamw_scalars(1e-3, 0.0, 0.0, 1e-8, 0.0, 1.0, 1);
  States8bit ref = s;
  testing::optim_update_8bit(sc, block, grad_dtype, ref);
  compile::KernelCache cache;
  const States8bit got = testing::updated_8bit(
      s, grad_dtype, Device::cpu(),
      [&](const Tensor& p, const Tensor& g, const Tensor& mc, const Tensor& ms, const Tensor& vc,
          const Tensor& vs, const Tensor& copy) {
        compiled_adamw8bit_update(cache, sc, block, p, g, mc, ms, vc, vs, copy);
      });
  ASSERT_EQ(bits(got.m_scales[0]), bits(1.0f));
  ASSERT_EQ(bits(got.v_scales[0]), bits(1.0f));
  for (size_t i = 0; i < s.g.size(); ++i) {
    ASSERT_EQ(int{got.m_codes[i]}, int{quantize_nearest(signed_code(), s.g[i])}) << "g " << s.g[i];
    ASSERT_EQ(int{got.v_codes[i]}, int{quantize_nearest(unsigned_code(), std::abs(s.g[i]))})
        << "g " << s.g[i];
    ASSERT_EQ(int{got.m_codes[i]}, int{ref.m_codes[i]}) << "g " << s.g[i];
    ASSERT_EQ(int{got.v_codes[i]}, int{ref.v_codes[i]}) << "g " << s.g[i];
  }
}

INSTANTIATE_TEST_SUITE_P(GradDtypes, CompiledAdamW8bit, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lt::optim
