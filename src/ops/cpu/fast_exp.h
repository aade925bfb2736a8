#pragma once
// exp(x) for f32 written so that GCC vectorizes loops calling it (libm's
// expf is a call per element and dominated the CPU cross-entropy: ~100 M
// calls per step of the demo model's 50k vocabulary). Range reduction
// x = n ln2 + r with |r| <= ln2/2, then Cephes' degree-6 polynomial for e^r
// (relative error ~2e-7, about 2 ulp), then scaling by 2^n through the
// exponent bits. Inputs below ~-87.3 give ~1e-38 rather than 0, which
// vanishes in every sum it is used in; inputs above 88 are clamped to 88
// (e^88 = 1.65e38: at the old bound, 88.376, n rounded to 128 and gave inf).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace lt::ops::cpu {

inline float fast_expf(float x) {
  constexpr float kMax = 88.0f;
  constexpr float kMin = -87.3365478515625f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  // NaN stays NaN (selected at the end); the arithmetic runs on 0 instead,
  // since converting NaN to an integer is undefined.
  const bool is_nan = x != x;
  x = is_nan ? 0.0f : std::min(std::max(x, kMin), kMax);
  // n = round(x / ln2) = floor(x log2e + 0.5). Shifted by 128 the argument
  // is positive (x log2e >= -126), so truncation is the floor: no branch,
  // no libm call, and the loop vectorizes.
  const int32_t n = static_cast<int32_t>(x * kLog2e + 128.5f) - 128;
  const float fn = static_cast<float>(n);
  const float r = (x - fn * kLn2Hi) - fn * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(n + 127) << 23;
  return is_nan ? std::numeric_limits<float>::quiet_NaN() : p * std::bit_cast<float>(bits);
}

// f32 takes the vectorizable path; f64 (reference and gradient checks)
// keeps libm's exact exp.
template <typename T>
inline T exp_kernel(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return fast_expf(x);
  } else {
    return std::exp(x);
  }
}

}  // namespace lt::ops::cpu

namespace lt::ops::cpu {

// fast_expf over a GCC vector-extension vector of floats (F) with the
// int32 vector of the same lanes (I): the compiler maps it onto whatever
// vector unit the function is compiled for (at the x86-64 baseline, SSE
// registers; in a target("avx2") or target("avx512f") function, ymm or zmm
// registers: ops/cpu/softmax_rows.cpp), with no per-element branch.
// (Auto-vectorizing the scalar version fails: GCC turns the clamps back
// into branches.)
template <typename F, typename I>
[[gnu::always_inline]] inline F fast_expv(F x) {
  const F lo = F{} - 87.3365478515625f, hi = F{} + 88.0f;
  // NaN lanes compute on 0 (a NaN to integer conversion is undefined) and
  // are put back at the end.
  const I is_nan = x != x;
  const F input = x;
  x = is_nan ? F{} : x;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const I n = __builtin_convertvector(x * 1.44269504088896341f + 128.5f, I) - 128;
  const F fn = __builtin_convertvector(n, F);
  const F r = (x - fn * 0.693359375f) - fn * -2.12194440e-4f;
  F p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const I bits = (n + 127) << 23;
  const F result = p * (F)bits;  // a vector cast reinterprets the bits
  return is_nan ? input : result;
}

using Float8 = float __attribute__((vector_size(32)));
using Int8 = int32_t __attribute__((vector_size(32)));

[[gnu::always_inline]] inline Float8 fast_exp8(Float8 x) {
  return fast_expv<Float8, Int8>(x);
}

}  // namespace lt::ops::cpu
