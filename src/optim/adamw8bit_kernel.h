#pragma once
// Blockwise 8-bit AdamW states: the dynamic 8-bit code, quantization, and the
// fused per-block update (dequantize m and sqrt(v), AdamW exactly as
// optim/adamw_kernel.h orders it, requantize with the new block absmax).
//
// Note [the second moment is stored as sqrt(v)]
// The states are m (signed code) and sqrt(v) (unsigned code), not v. An
// element whose gradients are c times its block's largest sits at ~c of the
// block's m absmax but at ~c^2 of its v absmax: v spans twice the decades m
// does. The code resolves down to 1e-7 of the absmax, so v stored as itself
// rounds to 0 for every element with c below ~2e-4 (v / absmax < 5e-8),
// while m stays nonzero down to c ~ 5e-7; such an element then steps by
// lr * m / eps instead of ~lr. In the demo (a tied 50257 x 96 embedding,
// rare tokens' rows sharing blocks with frequent ones) ~25k embedding
// elements per step had v = 0 with m != 0 and moved up to ~1000 x lr, and
// the loss spiked to 12.5 against AdamW's 6 (issue 18; smaller blocks only
// made it rarer). sqrt(v) spans the decades m spans, so it is representable
// wherever m is: it rounds to 0 only below ~5e-8 of its absmax, where m has
// become 0 (or its -1e-7) as well. The update squares the dequantized value
// to get v (the only extra operation) and takes the sqrt of the new v that
// AdamW computes anyway. The price is resolution near the absmax: rounding
// in the top tier errs by up to 0.35% of the block's largest sqrt(v), where
// it erred by 0.35% of the largest v (0.18% of its sqrt).
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
//   - unsigned (sqrt(v) >= 0): 8 bits, E = 0..7, F = 7 - E: 255 magnitudes
//     plus 0. Range [0, 1]; the top tier has 128 values (twice the signed
//     one's resolution), as the denominator of every step.
// This differs from bitsandbytes' create_dynamic_map only in where the
// values sit inside a tier (its are midpoints of linspace(0.1, 1, n + 1),
// which leaves 1.0 out and -1 absent from the signed map); including the
// top end makes the absmax round trip exactly and gives a symmetric range.
//
// The stored byte is the value's rank in the sorted table (as bitsandbytes
// stores an index into its sorted map), so quantize is a search and
// dequantize one table load. Nearest value; an exact tie between two
// neighbours goes to the one of smaller magnitude (towards 0). What is
// quantized is x / absmax computed as x * (1 / absmax) in f32 (Reciprocal
// below: one division per block, not per element; it may differ from the
// division in the last bit, which can move a value sitting at a midpoint).
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

// quantize_nearest for the kernels, without its branchy binary search
// (which mispredicts on most of its 8 levels) and without a per-value table
// walk. The code is piecewise uniform: with the decade thresholds
// 10^-1 .. 10^-7 (all of them code values) splitting [0, 1] into segments
// [10^-(E+1), 10^-E) (E = 0..6; E = 7 is [0, 10^-7)), each segment holds
// code magnitudes low, low + step, low + 2 step, ... where `low` is the
// largest code magnitude <= the segment's bottom (the top of the next tier,
// or 0) on that sign's side. So |x| sits at the fractional position
//   j = (|x| - low) * (1 / step)
// and the nearest code is `base +- rint(j)` (base: the rank of `low`;
// minus on the negative side, where ranks fall as magnitudes grow). The f32
// arithmetic is off from the exact position by < 1e-4 (the f32 rounding of
// the code values, of the quotient and of j itself), far less than the
// margin kNearTie: when j lies within kNearTie of a midpoint (k + 0.5, a
// near-tie, ~0.05% of values) or is NaN, the position is not trusted and
// quantize_nearest decides. The result is therefore quantize_nearest's for
// every x (the tests check all f32 values in [2^-27, 1 + 4 ulp] of both signs
// against the reference search, and random ones below).
//
// The segment of |x| comes from its f32 exponent: at most one decade
// threshold falls inside a binade [2^e, 2^(e+1)) (a decade spans 3.3 of
// them), so segment = segment_of_binade[e] + (|x| < split_of_binade[e]), with
// e clamped to the 32 binades [2^-31, 2) (everything below 2^-31 is in
// segment 7). The vector kernels look the same small tables up in registers
// and perform the same f32 operations, so all paths agree bit for bit.
struct Code8Segments {
  const Code8* code;
  // The decade thresholds 10^-1 .. 10^-7 (the segment of |x| is the number
  // of them above |x|; the tables below give the same count).
  std::array<float, 7> decade;
  // Indexed by the biased f32 exponent of |x| minus 96 (clamped at 0).
  std::array<int32_t, 32> segment_of_binade;
  std::array<float, 32> split_of_binade;  // a decade inside the binade, or 0
  // Indexed by segment + 8 for negative x (sign bit set).
  std::array<float, 16> low, inv_step;
  std::array<int32_t, 16> base;
};

// j within this distance of k + 0.5 is a near-tie (see above).
constexpr float kNearTie = 1.0f / 4096.0f;
// 1.5 * 2^23: adding and subtracting it rounds an f32 of magnitude < 2^22
// to an integer, to nearest even, in two IEEE operations every path has.
constexpr float kRoundToInteger = 12582912.0f;
constexpr int32_t kLowestBinade = 96;  // biased exponent of 2^-31

namespace detail {

inline uint32_t bits_of(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

inline Code8Segments make_segments(const Code8& code, const std::array<double, 256>& exact) {
  Code8Segments s{&code, {}, {}, {}, {}, {}, {}};
  const bool is_signed = exact[0] < 0;
  // The decade thresholds 10^-1 .. 10^-7 as the code's own f32 magnitudes
  // (the signed code has 10^-7 on its negative side only).
  std::array<float, 7>& decade = s.decade;
  for (size_t k = 0; k < 7; ++k) {
    const double d = std::pow(10.0, -static_cast<double>(k + 1));
    size_t at = 256;
    for (size_t i = 0; i < 256; ++i)
      if (std::abs(std::abs(exact[i]) - d) <= 1e-12 * d) at = i;
    if (at == 256) std::abort();  // not a code value: the code changed
    decade[k] = std::abs(code[at]);
  }
  const auto rank_of = [&](double value) {
    const auto it = std::lower_bound(exact.begin(), exact.end(), value);
    if (it == exact.end() || *it != value) std::abort();
    return static_cast<int32_t>(it - exact.begin());
  };
  for (int negative = 0; negative < 2; ++negative) {
    const double sign = negative ? -1.0 : 1.0;
    // The code magnitudes on this side, ascending (0 included).
    std::vector<double> mags;
    for (double c : exact)
      if (c == 0.0 || (c > 0) == (sign > 0)) mags.push_back(std::abs(c));
    std::sort(mags.begin(), mags.end());
    if (negative && !is_signed) {
      // No negative values in the table: a NaN position sends any negative
      // x (never asked by the update: sqrt(v) >= 0) to quantize_nearest.
      for (size_t e = 8; e < 16; ++e) s.inv_step[e] = std::numeric_limits<float>::quiet_NaN();
      break;
    }
    for (int e = 0; e < 8; ++e) {
      const double bottom = e < 7 ? static_cast<double>(decade[size_t(e)]) : 0.0;
      const double top = e > 0 ? static_cast<double>(decade[size_t(e - 1)]) : 2.0;
      size_t lo = 0;  // the largest magnitude <= bottom
      while (lo + 1 < mags.size() && mags[lo + 1] <= bottom * (1 + 1e-6)) ++lo;
      if (lo + 1 >= mags.size()) std::abort();
      const double step = mags[lo + 1] - mags[lo];
      // Every magnitude up to the segment's top must sit on the grid.
      for (size_t k = lo; k < mags.size() && mags[k] <= top * (1 + 1e-6); ++k) {
        const double j = (mags[k] - mags[lo]) / step;
        if (std::abs(j - std::round(j)) > 1e-9) std::abort();  // not uniform: the code changed
      }
      const size_t at = static_cast<size_t>(8 * negative + e);
      s.low[at] = static_cast<float>(mags[lo]);
      s.inv_step[at] = static_cast<float>(1.0 / step);
      s.base[at] = rank_of(sign * mags[lo] == 0.0 ? 0.0 : sign * mags[lo]);
    }
  }
  for (int32_t b = 0; b < 32; ++b) {
    // Binade [2^(b + 96 - 127), 2^(b + 96 - 126)); b = 0 also holds all below.
    const float bottom = b == 0 ? 0.0f : std::ldexp(1.0f, b + kLowestBinade - 127);
    const float top = std::ldexp(1.0f, b + kLowestBinade - 126);
    int32_t seg_top = 0, inside = 0;  // segment of the binade's top part
    float split = 0.0f;
    for (int k = 0; k < 7; ++k) {
      if (decade[size_t(k)] >= top) ++seg_top;  // top part is below this threshold
      if (decade[size_t(k)] > bottom && decade[size_t(k)] < top)
        split = decade[size_t(k)], ++inside;
    }
    if (inside > 1) std::abort();
    s.segment_of_binade[size_t(b)] = seg_top;
    s.split_of_binade[size_t(b)] = split;
  }
  return s;
}

}  // namespace detail

// The segment tables of the two codes (built once).
inline const Code8Segments& segments_of(const Code8& code) {
  static const Code8Segments s = detail::make_segments(signed_code(), detail::make_code(true));
  static const Code8Segments u = detail::make_segments(unsigned_code(), detail::make_code(false));
  if (&code == &signed_code()) return s;
  if (&code == &unsigned_code()) return u;
  std::abort();  // only the two tables above are ever quantized to
}

// The fast path alone: writes the rank and returns true, or returns false on
// a near-tie or NaN (the caller then asks quantize_nearest). |x| < 2 (the
// quotient by the block absmax is at most 1 + 2 ulp).
inline bool segment_rank(const Code8Segments& s, float x, uint8_t& rank) {
  const uint32_t bits = detail::bits_of(x);
  const uint32_t magnitude_bits = bits & 0x7fffffffu;
  float a;
  std::memcpy(&a, &magnitude_bits, sizeof a);
  const int32_t exponent = static_cast<int32_t>(magnitude_bits >> 23);
  const size_t binade = static_cast<size_t>(std::max(exponent, kLowestBinade) & 31);
  const int32_t segment = s.segment_of_binade[binade] + (a < s.split_of_binade[binade] ? 1 : 0) +
                          ((bits >> 31) != 0 ? 8 : 0);
  const auto at = static_cast<size_t>(segment);
  const float j = (a - s.low[at]) * s.inv_step[at];
  const float nearest = (j + kRoundToInteger) - kRoundToInteger;
  if (!(std::abs(j - nearest) < 0.5f - kNearTie)) return false;
  const int32_t k = static_cast<int32_t>(nearest);
  rank = static_cast<uint8_t>(segment >= 8 ? s.base[at] - k : s.base[at] + k);
  return true;
}

inline uint8_t quantize_nearest_fast(const Code8Segments& s, float x) {
  uint8_t rank;
  return segment_rank(s, x, rank) ? rank : quantize_nearest(*s.code, x);
}

// What the kernels quantize: x / absmax, computed as x * (1 / absmax) (one
// division per block instead of one per element). When 1 / absmax is not
// finite (a subnormal absmax) the quotient is the division itself.
struct Reciprocal {
  float absmax, inverse;
  bool finite;
  explicit Reciprocal(float absmax_)
      : absmax(absmax_), inverse(1.0f / absmax_), finite(std::isfinite(inverse)) {}
  float of(float x) const { return finite ? x * inverse : x / absmax; }
};

// Quantizes n values with one absmax scale; returns the scale. An all-zero
// block has scale 0 and every byte at the rank of 0.
inline float quantize_block(const Code8& code, const float* x, uint8_t* out, int64_t n) {
  const Code8Segments& segments = segments_of(code);
  float absmax = 0.0f;
  for (int64_t i = 0; i < n; ++i) absmax = std::max(absmax, std::abs(x[i]));
  if (absmax == 0.0f) {
    const uint8_t zero = quantize_nearest(code, 0.0f);
    for (int64_t i = 0; i < n; ++i) out[i] = zero;
    return 0.0f;
  }
  const Reciprocal r(absmax);
  for (int64_t i = 0; i < n; ++i) out[i] = quantize_nearest_fast(segments, r.of(x[i]));
  return absmax;
}

inline void dequantize_block(const Code8& code, const uint8_t* q, float scale, float* out,
                             int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = code[q[i]] * scale;
}

namespace detail {

// One element of the 8-bit update, the very operations of adamw_update: m
// and `sqrt_v` (sqrt(v), as stored) in, the new m and sqrt(v) out; returns
// the new parameter. The vector and CUDA kernels do the same, in this order.
template <typename Grad>
inline float update_from_sqrt_v(const AdamWScalars& s, float p, Grad grad, float& m,
                                float& sqrt_v) {
  float v = sqrt_v * sqrt_v;
  const float decayed = moments(s, p, grad, m, v);
  sqrt_v = std::sqrt(v);
  return apply(s, decayed, m, sqrt_v);
}

}  // namespace detail

// One block of the fused update. `m`, `sqrt_v` are scratch of n floats; the
// codes and scales are read and rewritten in place; `shadow` (may be null)
// gets the bf16 of each new parameter value. This is the scalar path;
// kernels_simd.h has the AVX2/AVX-512 ones (same results, bit for bit).
template <typename Grad>
void adamw8bit_update_block(const AdamWScalars& s, float* __restrict param,
                            const Grad* __restrict grad, uint8_t* __restrict m_codes,
                            float& m_scale, uint8_t* __restrict sqrt_v_codes, float& sqrt_v_scale,
                            float* __restrict m, float* __restrict sqrt_v,
                            uint16_t* __restrict shadow, int64_t n) {
  dequantize_block(signed_code(), m_codes, m_scale, m, n);
  dequantize_block(unsigned_code(), sqrt_v_codes, sqrt_v_scale, sqrt_v, n);
  for (int64_t i = 0; i < n; ++i) {
    param[i] = detail::update_from_sqrt_v(s, param[i], grad[i], m[i], sqrt_v[i]);
    if (shadow != nullptr) shadow[i] = f32_to_bf16(param[i]);
  }
  m_scale = quantize_block(signed_code(), m, m_codes, n);
  sqrt_v_scale = quantize_block(unsigned_code(), sqrt_v, sqrt_v_codes, n);
}

}  // namespace lt::optim
