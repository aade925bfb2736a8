#pragma once
// Blockwise 8-bit AdamW states: the dynamic 8-bit code, quantization, and the
// fused per-block update (dequantize m and v, AdamW exactly as
// optim/adamw_kernel.h orders it, requantize with the new block absmax).
//
// The dynamic data type (Dettmers et al., "8-bit Optimizers via Block-wise
// Quantization", 2021) spends its bits as: [sign] [a run of E zero bits]
// [one indicator bit 1] [F = remaining bits: a linear fraction]. The run
// length E is a decimal exponent, so every tier covers one decade and the
// code keeps ~the same relative precision from 1 down to 1e-6/1e-7 of the
// block absmax. That is what the Adam moments need: within one block they
// span several decades, and a linear 8-bit code would round most of v to 0.
//
// The exact code used here (both tables are built by make_code below):
//   tier E, fraction bits F, n = 2^F values k = 0..n-1:
//     magnitude = 10^-E * (0.1 + 0.9 * (k + 1) / n)     in (0.1, 1] * 10^-E
//   i.e. the fraction is linear over each decade and includes its top end,
//   so E = 0 contains exactly 1.0 (the block absmax itself is exact).
//   - signed (m): 1 sign bit + 7 bits, E = 0..6, F = 6 - E: 127 magnitudes
//     per sign, plus 0 (all seven bits zero, sign +). The pattern "sign -,
//     all zero" would be -0, a duplicate; it is given -1e-7 (one more tier,
//     on the negative side only) so the 256 values are distinct. Range
//     [-1, 1], with -1, 0, 1 present.
//   - unsigned (v >= 0): 8 bits, E = 0..7, F = 7 - E: 255 magnitudes plus 0.
//     Range [0, 1]; the top tier has 128 values (twice the signed one's
//     resolution), as v's square root enters the update.
// This differs from bitsandbytes' create_dynamic_map only in where the
// values sit inside a tier (its are midpoints of linspace(0.1, 1, n + 1),
// which leaves 1.0 out and -1 absent from the signed map); including the
// top end makes the absmax round trip exactly and gives a symmetric range.
//
// The stored byte is the value's rank in the sorted table (as bitsandbytes
// stores an index into its sorted map), so quantize is a binary search and
// dequantize one table load. Nearest value; an exact tie between two
// neighbours goes to the one of smaller magnitude (towards 0).
//
// Spacing and error bound: inside tier E the step is 0.9 * 10^-E / 2^F, so
// rounding to nearest errs by at most half of it. For |x| / absmax in
// tier E that is a relative error <= 0.45 / 2^F / 0.1 = 4.5 / 2^F of the
// tier's bottom (0.1 * 10^-E), e.g. 7% in the signed top tier (F = 6), and
// an absolute error <= 0.45 * 10^-E / 2^F * absmax. Below the last tier
// (|x| < half the smallest value) x rounds to 0 or the smallest value.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "optim/adamw_kernel.h"

namespace lt::optim {

using Code8 = std::array<float, 256>;

namespace detail {

// The table values in double (the tests' reference uses these); sorted.
inline std::array<double, 256> make_code(bool is_signed) {
  std::array<double, 256> out{};
  size_t n_out = 0;
  const int magnitude_bits = is_signed ? 7 : 8;
  for (int e = 0; e < magnitude_bits; ++e) {
    const int f = magnitude_bits - 1 - e;
    const int64_t n = int64_t{1} << f;
    const double decade = std::pow(10.0, -e);
    for (int64_t k = 0; k < n; ++k) {
      const double mag = decade * (0.1 + 0.9 * static_cast<double>(k + 1) / static_cast<double>(n));
      out[n_out++] = mag;
      if (is_signed) out[n_out++] = -mag;
    }
  }
  out[n_out++] = 0.0;
  if (is_signed) out[n_out++] = -1e-7;  // the would-be -0 (see above)
  std::sort(out.begin(), out.end());
  return out;
}

inline Code8 to_f32(const std::array<double, 256>& d) {
  Code8 c{};
  for (size_t i = 0; i < 256; ++i) c[i] = static_cast<float>(d[i]);
  return c;
}

}  // namespace detail

// The two code tables, sorted ascending, as f32 (what the kernel uses).
inline const Code8& signed_code() {
  static const Code8 code = detail::to_f32(detail::make_code(true));
  return code;
}
inline const Code8& unsigned_code() {
  static const Code8 code = detail::to_f32(detail::make_code(false));
  return code;
}

// Rank of the table value nearest to x (x already divided by the absmax);
// ties go towards 0. Templated so the tests run the same search in double.
template <typename T, typename Table>
inline uint8_t quantize_nearest(const Table& code, T x) {
  const auto it = std::lower_bound(code.begin(), code.end(), x);
  if (it == code.begin()) return 0;
  if (it == code.end()) return 255;
  const size_t hi = static_cast<size_t>(it - code.begin());
  const size_t lo = hi - 1;
  const T d_lo = x - static_cast<T>(code[lo]);
  const T d_hi = static_cast<T>(code[hi]) - x;
  if (d_lo < d_hi) return static_cast<uint8_t>(lo);
  if (d_hi < d_lo) return static_cast<uint8_t>(hi);
  return static_cast<uint8_t>(std::abs(code[lo]) <= std::abs(code[hi]) ? lo : hi);
}

// quantize_nearest for the kernel, without its branchy binary search (which
// mispredicts on most of its 8 levels and made the update ~40x slower than
// the fp32 one). A float's top 17 bits (sign, exponent, 8 mantissa bits)
// name a bucket of relative width <= 2^-8 = 0.39%, narrower than the
// code's smallest relative spacing (0.9/128 = 0.70%, the unsigned top
// tier), so no bucket holds two midpoints between code values: its nearest
// rank is one of r, r + 1 with r the nearest rank of the bucket's smallest
// value. The final choice applies quantize_nearest's own comparisons and
// tie rule, so the result is exactly quantize_nearest's for every non-NaN x
// (make_search checks the one-midpoint property; the tests check the ranks
// on every midpoint and its f32 neighbours, and against brute force).
//
// The choice between r and r + 1 is then one comparison: quantize_nearest's
// rule (d_hi < d_lo, or a tie with |hi| < |lo|, all in f32) is monotone in x
// between the two table values (d_lo = x - lo rounds non-decreasing, d_hi =
// hi - x non-increasing), so for each rank r there is a smallest f32
// `up_from[r]` where it picks r + 1; make_search finds it by bisection over
// the f32 values themselves, so x >= up_from[r] is the rule, exactly.
struct Code8Search {
  const Code8* code;
  std::vector<uint8_t> bucket;  // 2^17 ranks
  std::array<float, 256> up_from;
};

namespace detail {

inline uint32_t bucket_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits >> 15;
}

inline Code8Search make_search(const Code8& code) {
  Code8Search s{&code, std::vector<uint8_t>(size_t{1} << 17), {}};
  for (uint32_t b = 0; b < (uint32_t{1} << 17); ++b) {
    // The bucket's smallest value: its first bit pattern if positive, its
    // last (largest magnitude) if negative.
    const uint32_t lo_bits = (b & 0x10000u) ? ((b << 15) | 0x7fffu) : (b << 15);
    const uint32_t hi_bits = (b & 0x10000u) ? (b << 15) : ((b << 15) | 0x7fffu);
    float lo, hi;
    std::memcpy(&lo, &lo_bits, sizeof lo);
    std::memcpy(&hi, &hi_bits, sizeof hi);
    if (std::isnan(lo) || std::isnan(hi)) continue;  // NaN patterns: never asked
    const uint8_t r = quantize_nearest(code, lo);
    const uint8_t r_hi = quantize_nearest(code, hi);
    if (r_hi - r > 1) std::abort();  // two midpoints in one bucket: the code changed
    s.bucket[b] = r;
  }
  // An order-preserving map of f32 (not NaN) to uint32, and back.
  auto key = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  };
  auto value = [](uint32_t k) {
    const uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  for (size_t r = 0; r + 1 < 256; ++r) {
    const float lo = code[r], hi = code[r + 1];
    auto up = [&](float x) {
      const float d_lo = x - lo, d_hi = hi - x;
      return d_hi < d_lo || (d_hi == d_lo && std::abs(hi) < std::abs(lo));
    };
    uint32_t below = key(lo), at = key(hi);  // up(lo) is false, up(hi) true
    if (up(lo) || !up(hi)) std::abort();
    while (at - below > 1) {
      const uint32_t mid = below + (at - below) / 2;
      (up(value(mid)) ? at : below) = mid;
    }
    s.up_from[r] = value(at);
  }
  s.up_from[255] = std::numeric_limits<float>::infinity();  // nothing above the top
  return s;
}

}  // namespace detail

// The bucket tables of the two codes (built once, 128 KiB each).
inline const Code8Search& search_of(const Code8& code) {
  static const Code8Search s = detail::make_search(signed_code());
  static const Code8Search u = detail::make_search(unsigned_code());
  if (&code == &signed_code()) return s;
  if (&code == &unsigned_code()) return u;
  std::abort();  // only the two tables above are ever quantized to
}

inline uint8_t quantize_nearest_fast(const Code8Search& s, float x) {
  const uint8_t r = s.bucket[detail::bucket_of(x)];
  return static_cast<uint8_t>(r + (x >= s.up_from[r] ? 1 : 0));
}

// Quantizes n values with one absmax scale; returns the scale. An all-zero
// block has scale 0 and every byte at the rank of 0.
inline float quantize_block(const Code8& code, const float* x, uint8_t* out, int64_t n) {
  const Code8Search& search = search_of(code);
  float absmax = 0.0f;
  for (int64_t i = 0; i < n; ++i) absmax = std::max(absmax, std::abs(x[i]));
  if (absmax == 0.0f) {
    const uint8_t zero = quantize_nearest(code, 0.0f);
    for (int64_t i = 0; i < n; ++i) out[i] = zero;
    return 0.0f;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = quantize_nearest_fast(search, x[i] / absmax);
  return absmax;
}

inline void dequantize_block(const Code8& code, const uint8_t* q, float scale, float* out,
                             int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = code[q[i]] * scale;
}

// One block of the fused update. `m`, `v` are scratch of n floats; the codes
// and scales are read and rewritten in place; `shadow` (may be null) gets
// the bf16 of each new parameter value. This is the scalar path;
// kernels_simd.h has the AVX2/AVX-512 ones (same results, bit for bit).
template <typename Grad>
void adamw8bit_update_block(const AdamWScalars& s, float* __restrict param,
                            const Grad* __restrict grad, uint8_t* __restrict m_codes,
                            float& m_scale, uint8_t* __restrict v_codes, float& v_scale,
                            float* __restrict m, float* __restrict v, uint16_t* __restrict shadow,
                            int64_t n) {
  dequantize_block(signed_code(), m_codes, m_scale, m, n);
  dequantize_block(unsigned_code(), v_codes, v_scale, v, n);
  // The very operations of adamw_update, element by element.
  for (int64_t i = 0; i < n; ++i) {
    const float decayed = detail::moments(s, param[i], grad[i], m[i], v[i]);
    param[i] = detail::apply(s, decayed, m[i], std::sqrt(v[i]));
    if (shadow != nullptr) shadow[i] = f32_to_bf16(param[i]);
  }
  m_scale = quantize_block(signed_code(), m, m_codes, n);
  v_scale = quantize_block(unsigned_code(), v, v_codes, n);
}

}  // namespace lt::optim
