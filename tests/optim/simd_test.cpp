// The AVX2 / AVX-512 optimizer kernels (kernels_simd.h) against the scalar
// kernels, a float64 reference of the same algorithm, and brute force (the
// bf16 rounding of the shadow, the nearest 8-bit code). The vector paths
// must give the scalar path's results bit for bit; vector paths the CPU
// lacks are skipped (the scalar one is then all there is).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "nn/module.h"
#include "ops/elementwise.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "optim/kernels_simd.h"
#include "support/errors.h"

namespace lt::optim {
namespace {

std::vector<Isa> vector_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

#define SKIP_WITHOUT_VECTOR_ISA() \
  if (vector_isas().empty()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512"

// Heavy-tailed: normal scaled by 10^U(-6, 1), so a run spans several decades.
std::vector<float> heavy_tailed(std::mt19937& rng, size_t n, double scale) {
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> decades(-6, 1);
  std::vector<float> x(n);
  for (float& e : x) e = static_cast<float>(scale * normal(rng) * std::pow(10.0, decades(rng)));
  return x;
}

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

template <typename T>
void expect_same_bits(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      ADD_FAILURE() << what << " differs at " << i;
      return;
    }
  }
}

// bf16 of x by brute force: the two bf16 values around x (truncation and
// the next one away from zero), the nearer one in double, ties to the even
// pattern; NaN becomes a NaN.
bool is_bf16_of(float x, uint16_t got) {
  const float widened = bf16_to_f32(got);
  if (std::isnan(x)) return std::isnan(widened);
  const uint32_t u = bits_of(x);
  const uint16_t down = static_cast<uint16_t>(u >> 16);
  const uint16_t up = static_cast<uint16_t>(down + 1);  // next magnitude (may be inf)
  // Past the largest finite bf16, IEEE rounds as if the next value were
  // 2^128 (the infinity pattern's place in the exponent sequence).
  const double up_value = (up & 0x7fff) == 0x7f80 ? std::copysign(0x1.0p128, x) : bf16_to_f32(up);
  const double dd = std::abs(static_cast<double>(x) - bf16_to_f32(down));
  const double du = std::abs(up_value - x);
  uint16_t want = dd < du ? down : du < dd ? up : ((down & 1) == 0 ? down : up);
  if ((u & 0xffffu) == 0) want = down;  // exact
  return got == want;
}

// --- fp32 AdamW -----------------------------------------------------------

struct Fp32Case {
  std::vector<float> p, g, m, v;
  std::vector<BFloat16> g16;
};

Fp32Case fp32_case(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Fp32Case c;
  c.p = heavy_tailed(rng, n, 1.0);
  c.g = heavy_tailed(rng, n, 1e-2);
  c.m = heavy_tailed(rng, n, 1e-3);
  c.v = heavy_tailed(rng, n, 1e-5);
  for (float& x : c.v) x = std::abs(x);
  for (float g : c.g) c.g16.push_back({f32_to_bf16(g)});
  return c;
}

struct Fp32Result {
  std::vector<float> p, m, v;
  std::vector<uint16_t> shadow;
};

template <typename Grad>
Fp32Result run_fp32(Isa isa, const AdamWScalars& s, const Fp32Case& c, const Grad* g) {
  Fp32Result r{c.p, c.m, c.v, std::vector<uint16_t>(c.p.size(), 0xdead)};
  adamw_update(isa, s, r.p.data(), g, r.m.data(), r.v.data(), r.shadow.data(),
               static_cast<int64_t>(r.p.size()));
  return r;
}

// The same algorithm in double from the same f32 inputs and scalars.
void expect_near_float64(const AdamWScalars& s, const Fp32Case& c, const std::vector<float>& g,
                         const Fp32Result& r) {
  for (size_t i = 0; i < c.p.size(); ++i) {
    const double gs = static_cast<double>(g[i]) * s.grad_scale;
    const double m =
        s.beta1 * static_cast<double>(c.m[i]) + static_cast<double>(s.one_minus_beta1) * gs;
    const double v =
        s.beta2 * static_cast<double>(c.v[i]) + static_cast<double>(s.one_minus_beta2) * gs * gs;
    const double decayed = static_cast<double>(c.p[i]) * s.decay_factor;
    const double step = s.neg_step_size * m / (std::sqrt(v) / s.bias_correction2_sqrt + s.eps);
    const double p = decayed + step;
    ASSERT_NEAR(r.m[i], m, 4e-7 * (std::abs(s.beta1 * c.m[i]) + std::abs(s.one_minus_beta1 * gs)))
        << i;
    ASSERT_NEAR(r.v[i], v, 4e-7 * v) << i;
    // m may cancel (b1 m and (1 - b1) g of opposite signs): its absolute
    // error, not its relative one, is what the step inherits.
    const double denom = std::sqrt(v) / s.bias_correction2_sqrt + s.eps;
    const double m_err = 4e-7 * (std::abs(s.beta1 * c.m[i]) + std::abs(s.one_minus_beta1 * gs));
    const double step_err = std::abs(s.neg_step_size) * m_err / denom + 1e-6 * std::abs(step);
    ASSERT_NEAR(r.p[i], p, 4e-7 * (std::abs(decayed) + std::abs(p)) + step_err + 1e-38) << i;
  }
}

TEST(OptimSimd, AdamWVectorPathsMatchScalarBitwiseAndFloat64) {
  SKIP_WITHOUT_VECTOR_ISA();
  const AdamWScalars s = adamw_scalars(3e-3, 0.9, 0.999, 1e-8, 0.1, 0.7, 3);
  for (size_t n : {size_t{1}, size_t{15}, size_t{1000 + 7}, size_t{4096}}) {
    const Fp32Case c = fp32_case(n, static_cast<uint32_t>(n));
    std::vector<float> g16_widened;
    for (BFloat16 g : c.g16) g16_widened.push_back(bf16_to_f32(g.bits));
    const Fp32Result scalar = run_fp32(Isa::kScalar, s, c, c.g.data());
    const Fp32Result scalar16 = run_fp32(Isa::kScalar, s, c, c.g16.data());
    expect_near_float64(s, c, c.g, scalar);
    for (Isa isa : vector_isas()) {
      const std::string what = std::string(isa_name(isa)) + " n=" + std::to_string(n);
      const Fp32Result r = run_fp32(isa, s, c, c.g.data());
      expect_same_bits(r.p, scalar.p, what + " param");
      expect_same_bits(r.m, scalar.m, what + " exp_avg");
      expect_same_bits(r.v, scalar.v, what + " exp_avg_sq");
      expect_same_bits(r.shadow, scalar.shadow, what + " shadow");
      expect_near_float64(s, c, c.g, r);
      const Fp32Result r16 = run_fp32(isa, s, c, c.g16.data());
      expect_same_bits(r16.p, scalar16.p, what + " param, bf16 grads");
      expect_same_bits(r16.shadow, scalar16.shadow, what + " shadow, bf16 grads");
      expect_near_float64(s, c, g16_widened, r16);
      for (size_t i = 0; i < n; ++i)
        ASSERT_TRUE(is_bf16_of(r.p[i], r.shadow[i])) << what << " " << i;
    }
  }
}

// lr = 0, zero gradient, m = 0: the parameter is unchanged, so the shadow is
// bf16(p) for any p, special values included.
TEST(OptimSimd, ShadowIsRoundToNearestEvenByBruteForce) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> p = {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, std::nanf(""),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(),
                          // ties: exactly halfway between two bf16 values, odd and even below
                          bf16_to_f32(0x3f80) + 0x1.0p-8f, bf16_to_f32(0x3f81) + 0x1.0p-8f,
                          -(bf16_to_f32(0x3f81) + 0x1.0p-8f)};
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> any_bits;
  while (p.size() < 4099) {
    float x;
    const uint32_t u = any_bits(rng);
    std::memcpy(&x, &u, 4);
    p.push_back(x);
  }
  const size_t n = p.size();
  const AdamWScalars s = adamw_scalars(0.0, 0.9, 0.999, 1e-8, 0.0, 1.0, 1);
  const std::vector<float> zero(n, 0.0f);
  std::vector<Isa> isas = vector_isas();
  isas.push_back(Isa::kScalar);
  for (Isa isa : isas) {
    std::vector<float> q = p, m = zero, v(n, 1.0f);
    std::vector<uint16_t> shadow(n);
    adamw_update(isa, s, q.data(), zero.data(), m.data(), v.data(), shadow.data(),
                 static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isnan(p[i]) ? std::isnan(q[i]) : bits_of(q[i]) == bits_of(p[i])) << i;
      ASSERT_TRUE(is_bf16_of(p[i], shadow[i])) << isa_name(isa) << " element " << i << " bits "
                                               << std::hex << bits_of(p[i]) << " got " << shadow[i];
    }
  }
}

// --- 8-bit AdamW blocks ----------------------------------------------------

// The nearest table value to x in double, ties to the smaller magnitude.
uint8_t nearest_by_brute_force(const std::array<double, 256>& code, double x) {
  size_t best = 0;
  for (size_t k = 1; k < 256; ++k) {
    const double d = std::abs(x - code[k]), db = std::abs(x - code[best]);
    if (d < db || (d == db && std::abs(code[k]) < std::abs(code[best]))) best = k;
  }
  return static_cast<uint8_t>(best);
}

struct Block8 {
  std::vector<float> p, m_scratch, v_scratch;
  std::vector<uint8_t> m_codes, v_codes;
  float m_scale = 0, v_scale = 0;
  std::vector<uint16_t> shadow;
};

Block8 block_case(size_t n, uint32_t seed, bool zero_states) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  Block8 b;
  b.p = heavy_tailed(rng, n, 1.0);
  b.m_scratch.assign(n, 0.0f);
  b.v_scratch.assign(n, 0.0f);
  b.shadow.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    b.m_codes.push_back(zero_states ? quantize_nearest(signed_code(), 0.0f)
                                    : static_cast<uint8_t>(byte(rng)));
    b.v_codes.push_back(zero_states ? quantize_nearest(unsigned_code(), 0.0f)
                                    : static_cast<uint8_t>(byte(rng)));
  }
  b.m_scale = zero_states ? 0.0f : 3e-3f;
  b.v_scale = zero_states ? 0.0f : 2e-5f;
  return b;
}

template <typename Grad>
void run_block(Isa isa, const AdamWScalars& s, Block8& b, const Grad* g) {
  adamw8bit_update_block(isa, s, b.p.data(), g, b.m_codes.data(), b.m_scale, b.v_codes.data(),
                         b.v_scale, b.m_scratch.data(), b.v_scratch.data(), b.shadow.data(),
                         static_cast<int64_t>(b.p.size()));
}

// Every code is the brute-force nearest of (updated moment / block absmax),
// and the scale is that absmax.
void expect_nearest_codes(const Block8& b, const std::string& what) {
  const auto m_code = detail::make_code(true);
  const auto v_code = detail::make_code(false);
  float m_absmax = 0, v_absmax = 0;
  for (size_t i = 0; i < b.p.size(); ++i) {
    m_absmax = std::max(m_absmax, std::abs(b.m_scratch[i]));
    v_absmax = std::max(v_absmax, std::abs(b.v_scratch[i]));
  }
  ASSERT_EQ(b.m_scale, m_absmax) << what;
  ASSERT_EQ(b.v_scale, v_absmax) << what;
  for (size_t i = 0; i < b.p.size(); ++i) {
    // The kernels' quotient: x times the f32 reciprocal of the absmax.
    const float xm = m_absmax == 0 ? 0.0f : b.m_scratch[i] * (1.0f / m_absmax);
    const float xv = v_absmax == 0 ? 0.0f : b.v_scratch[i] * (1.0f / v_absmax);
    ASSERT_EQ(b.m_codes[i], nearest_by_brute_force(m_code, xm)) << what << " m " << i;
    ASSERT_EQ(b.v_codes[i], nearest_by_brute_force(v_code, xv)) << what << " v " << i;
    ASSERT_TRUE(is_bf16_of(b.p[i], b.shadow[i])) << what << " shadow " << i;
  }
}

TEST(OptimSimd, AdamW8bitBlockVectorPathsMatchScalarBitwiseAndBruteForce) {
  SKIP_WITHOUT_VECTOR_ISA();
  const AdamWScalars s = adamw_scalars(1e-3, 0.9, 0.999, 1e-8, 0.01, 0.5, 4);
  for (size_t n : {size_t{2048}, size_t{2048 - 5}, size_t{16}, size_t{7}}) {
    for (bool zero : {false, true}) {
      std::mt19937 rng(static_cast<uint32_t>(n));
      const std::vector<float> g = heavy_tailed(rng, n, 1e-2);
      std::vector<BFloat16> g16;
      for (float x : g) g16.push_back({f32_to_bf16(x)});
      Block8 scalar = block_case(n, 7, zero), scalar16 = scalar;
      run_block(Isa::kScalar, s, scalar, g.data());
      run_block(Isa::kScalar, s, scalar16, g16.data());
      const std::string base = "n=" + std::to_string(n) + (zero ? " zero states" : "");
      expect_nearest_codes(scalar, "scalar " + base);
      for (Isa isa : vector_isas()) {
        const std::string what = std::string(isa_name(isa)) + " " + base;
        Block8 r = block_case(n, 7, zero), r16 = r;
        run_block(isa, s, r, g.data());
        run_block(isa, s, r16, g16.data());
        expect_same_bits(r.p, scalar.p, what + " param");
        expect_same_bits(r.shadow, scalar.shadow, what + " shadow");
        expect_same_bits(r.m_codes, scalar.m_codes, what + " m codes");
        expect_same_bits(r.v_codes, scalar.v_codes, what + " v codes");
        EXPECT_EQ(bits_of(r.m_scale), bits_of(scalar.m_scale)) << what;
        EXPECT_EQ(bits_of(r.v_scale), bits_of(scalar.v_scale)) << what;
        expect_nearest_codes(r, what);
        expect_same_bits(r16.p, scalar16.p, what + " param, bf16 grads");
        expect_same_bits(r16.m_codes, scalar16.m_codes, what + " m codes, bf16 grads");
        expect_same_bits(r16.v_codes, scalar16.v_codes, what + " v codes, bf16 grads");
      }
    }
  }
}

// Note [The shadow is written past the cache]: the vector kernels stream
// the shadow where it is aligned to a register's bf16 bytes and store it
// plainly where not. Both ways give the scalar path's shadow, every element
// the brute-force bf16 of its parameter, at byte offsets 0, 2, 16 and 32
// from a 64-byte line (16 streams on AVX2 only, 2 on neither).
TEST(OptimSimd, TheShadowIsTheSameAlignedOrNot) {
  SKIP_WITHOUT_VECTOR_ISA();
  const AdamWScalars s = adamw_scalars(1e-3, 0.9, 0.999, 1e-8, 0.01, 0.5, 4);
  const size_t n = 2048 - 3;
  const Fp32Case c = fp32_case(n, 11);
  const Fp32Result scalar = run_fp32(Isa::kScalar, s, c, c.g.data());
  Block8 scalar8 = block_case(n, 5, false);
  run_block(Isa::kScalar, s, scalar8, c.g.data());
  std::vector<uint16_t> storage(n + 64);
  const auto line = (reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t{63};
  for (Isa isa : vector_isas()) {
    for (size_t offset : {size_t{0}, size_t{1}, size_t{8}, size_t{16}}) {
      const std::string what = std::string(isa_name(isa)) + " offset " + std::to_string(2 * offset);
      uint16_t* shadow = reinterpret_cast<uint16_t*>(line) + offset;
      std::fill(storage.begin(), storage.end(), uint16_t{0xdead});
      Fp32Result r{c.p, c.m, c.v, {}};
      adamw_update(isa, s, r.p.data(), c.g.data(), r.m.data(), r.v.data(), shadow,
                   static_cast<int64_t>(n));
      r.shadow.assign(shadow, shadow + n);
      expect_same_bits(r.shadow, scalar.shadow, what + " fp32 shadow");
      std::fill(storage.begin(), storage.end(), uint16_t{0xdead});
      Block8 b = block_case(n, 5, false);
      adamw8bit_update_block(isa, s, b.p.data(), c.g.data(), b.m_codes.data(), b.m_scale,
                             b.v_codes.data(), b.v_scale, b.m_scratch.data(), b.v_scratch.data(),
                             shadow, static_cast<int64_t>(n));
      b.shadow.assign(shadow, shadow + n);
      expect_same_bits(b.shadow, scalar8.shadow, what + " 8-bit shadow");
      for (size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(is_bf16_of(r.p[i], r.shadow[i])) << what << " " << i;
        ASSERT_TRUE(is_bf16_of(b.p[i], b.shadow[i])) << what << " " << i;
      }
    }
  }
}

// The vector quantizers on the values where their fast path must decline:
// every midpoint between two codes (times the absmax) and its f32
// neighbours, the code values themselves, the decade thresholds; NaN and
// a subnormal absmax (its reciprocal overflows: the division is used).
// Same ranks as the scalar path, and as the reference binary search on the
// quotient.
TEST(OptimSimd, QuantizeNearTiesMatchesScalarAndTheReferenceSearch) {
  SKIP_WITHOUT_VECTOR_ISA();
  for (const bool is_signed : {true, false}) {
    const Code8& code = is_signed ? signed_code() : unsigned_code();
    const auto exact = detail::make_code(is_signed);
    for (const float absmax : {1.0f, 3e-3f, 7.7e4f, 2e-39f}) {
      std::vector<float> x;
      for (size_t r = 0; r < 256; ++r) {
        x.push_back(code[r] * absmax);
        if (r + 1 == 256) continue;
        const float mid = 0.5f * (code[r] + code[r + 1]) * absmax;
        for (float y : {mid, std::nextafter(mid, 2e38f), std::nextafter(mid, -2e38f)})
          if (std::abs(y) <= absmax) x.push_back(y);
      }
      x.push_back(absmax);  // the block's absmax is the one given
      if (!is_signed) x.push_back(std::numeric_limits<float>::quiet_NaN());
      std::vector<uint8_t> want(x.size()), got(x.size());
      const float scale =
          quantize_block(Isa::kScalar, code, x.data(), want.data(), static_cast<int64_t>(x.size()));
      ASSERT_EQ(scale, absmax);
      const float inverse = 1.0f / absmax;
      for (size_t i = 0; i < x.size(); ++i) {
        const float y = std::isfinite(inverse) ? x[i] * inverse : x[i] / absmax;
        if (std::isnan(y)) continue;  // NaN: rank 0 by quantize_nearest, checked below
        // At an exact f32 tie the f32 table's rule (quantize_nearest, a
        // binary search) decides; brute force in double may differ there.
        ASSERT_EQ(want[i], quantize_nearest(code, y)) << "x=" << x[i] << " absmax=" << absmax;
        ASSERT_LE(std::abs(int(want[i]) - int(nearest_by_brute_force(exact, y))), 1);
      }
      for (Isa isa : vector_isas()) {
        const std::string what = std::string(isa_name(isa)) +
                                 (is_signed ? " signed" : " unsigned") +
                                 " absmax=" + std::to_string(absmax);
        EXPECT_EQ(quantize_block(isa, code, x.data(), got.data(), static_cast<int64_t>(x.size())),
                  absmax)
            << what;
        expect_same_bits(got, want, what);
      }
      if (!is_signed) {
        EXPECT_EQ(want.back(), 0) << "NaN takes rank 0";
      }
    }
  }
}

// --- whole optimizers: every ISA, shadows on ------------------------------

nn::NamedParameters make_model(uint64_t seed) {
  Generator gen(seed);
  nn::NamedParameters params;
  const std::vector<std::pair<std::string, Shape>> specs = {
      {"embed.weight", {97, 53}}, {"norm.weight", {53}}, {"mlp.weight", {53, 131}}, {"bias", {7}}};
  for (const auto& [name, shape] : specs)
    params.emplace_back(name, nn::make_parameter(Tensor::randn(shape, gen), name));
  return params;
}

nn::NamedParameters clone(const nn::NamedParameters& params) {
  nn::NamedParameters out;
  for (const auto& [name, p] : params) out.emplace_back(name, nn::make_parameter(p.clone(), name));
  return out;
}

void set_grads(const nn::NamedParameters& params, int step) {
  Generator gen(100 + static_cast<uint64_t>(step));
  for (const auto& [name, p] : params) {
    (void)name;
    p.set_grad(ops::scale(Tensor::randn(p.shape(), gen), 1e-2));
  }
}

template <typename Opt, typename Make>
void expect_isas_agree(Make make) {
  const nn::NamedParameters base = make_model(3);
  std::vector<Isa> isas = {Isa::kScalar};
  for (Isa isa : vector_isas()) isas.push_back(isa);
  std::vector<nn::NamedParameters> params;
  std::vector<std::vector<Tensor>> shadows;
  for (Isa isa : isas) {
    params.push_back(clone(base));
    Opt opt = make(params.back());
    opt.set_isa(isa);
    shadows.emplace_back();
    for (size_t i = 0; i < params.back().size(); ++i) {
      shadows.back().push_back(Tensor::empty(params.back()[i].second.shape(), DType::BF16));
      opt.set_bf16_shadow(i, shadows.back().back());
    }
    for (int step = 0; step < 3; ++step) {
      set_grads(params.back(), step);
      opt.step(2e-3, 0.8);
    }
  }
  for (size_t k = 0; k < isas.size(); ++k) {
    for (size_t i = 0; i < base.size(); ++i) {
      const Tensor& p = params[k][i].second;
      const Tensor& sh = shadows[k][i];
      const float* pv = p.data<float>();
      const auto* sv = static_cast<const uint16_t*>(sh.data_ptr());
      const float* p0 = params[0][i].second.data<float>();
      for (int64_t e = 0; e < p.numel(); ++e) {
        ASSERT_EQ(bits_of(pv[e]), bits_of(p0[e])) << isa_name(isas[k]) << " " << base[i].first;
        ASSERT_EQ(sv[e], f32_to_bf16(pv[e])) << isa_name(isas[k]) << " " << base[i].first;
      }
      EXPECT_NE(bits_of(pv[0]), bits_of(base[i].second.data<float>()[0])) << "not updated";
    }
  }
}

TEST(OptimSimd, AdamWEveryIsaGivesTheSameParametersAndShadows) {
  expect_isas_agree<AdamW>([](const nn::NamedParameters& p) {
    return AdamW(p, {.lr = 2e-3, .weight_decay = 0.1}, {"norm", "bias"});
  });
}

TEST(OptimSimd, AdamW8bitEveryIsaGivesTheSameParametersAndShadows) {
  // block 256 and threshold 1000: embed and mlp are 8-bit with a partial
  // last block, norm and bias take the f32 path (their shadows too).
  expect_isas_agree<AdamW8bit>([](const nn::NamedParameters& p) {
    return AdamW8bit(p, {.lr = 2e-3, .weight_decay = 0.1}, {"norm", "bias"}, {256, 1000});
  });
}

TEST(OptimSimd, ShadowAndOptionErrorsNameTheirSubject) {
  const nn::NamedParameters params = make_model(4);
  AdamW8bit opt(params, {}, {}, {256, 1000});
  using lt::testing::error_of;
  EXPECT_NE(error_of([&] {
              opt.set_bf16_shadow(0, Tensor::empty({97, 53}, DType::F32));
            }).find("'embed.weight' must be a contiguous bf16"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              opt.set_bf16_shadow(1, Tensor::empty({52}, DType::BF16));
            }).find("'norm.weight' must be a contiguous bf16"),
            std::string::npos);
  EXPECT_NE(error_of([&] { opt.set_bf16_shadow(9, Tensor()); }).find("index 9"), std::string::npos);
  EXPECT_NE(error_of([] {
              validate(AdamW8bitOptions{0, 4096});
            }).find("optim.block_size"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              validate(AdamW8bitOptions{kMaxBlockSize + 1, 4096});
            }).find("optim.block_size"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              validate(AdamW8bitOptions{2048, -1});
            }).find("optim.min_8bit_numel"),
            std::string::npos);
}

}  // namespace
}  // namespace lt::optim
