#pragma once
// The one body of the vector optimizer kernels, written against a small
// vector interface `V` that kernels_avx2.cpp and kernels_avx512.cpp define
// (after their target pragma, so these templates compile for that ISA):
//
//   V::kWidth                       floats per register
//   V::F                            the register type
//   load, store, set1, zero, add, sub, mul, div, sqrt, max, abs, hmax
//   load_grad(const float*), load_grad(const BFloat16*)   widened to f32
//   store_bf16(uint16_t*, F, stream)  round to nearest even, NaN stays NaN;
//                                   stream: a non-temporal store, to an
//                                   address aligned to the register's bf16
//                                   bytes (2 * kWidth); then _mm_sfence()
//   kLookupWidth, lookup_table(const Code8&), lookup(table, q, out):
//                                   out[i] = code[q[i]] for i < kLookupWidth
//                                   (kLookupWidth 0: scalar lookups only)
//   segment_tables(const Code8Segments&)  the segment tables laid out for
//   store_ranks<is_signed>(uint8_t*, F x, tables)  segment_rank on kWidth quotients:
//                                   stores the ranks, returns false if any
//                                   lane is a near-tie or NaN
//
// Per element, the operations are those of adamw_kernel.h's
// detail::moments and detail::apply in the same order; the remainder of a
// run (n not a multiple of kWidth) goes through those scalar functions.
// Include only from those two files, after their target pragma and after
// every other header (so no inline function of another header is compiled
// for the wider ISA).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <immintrin.h>

#include "optim/adamw8bit_kernel.h"
#include "optim/adamw_kernel.h"

namespace lt::optim::simd_body {

// Note [The shadow is written past the cache]
// The bf16 shadow is only written by the update (the copy engine reads it
// later, long after it left the cache), yet a plain store reads each line
// from memory before writing it. The update is bound by host memory
// bandwidth (the 8-bit one moves ~18 bytes a parameter, 2 of them that
// read), so the shadow is written with non-temporal stores where it is
// aligned, and fenced before the kernel returns, so that whoever is told
// the update is done (a thread, or a copy the upload thread starts) sees it.
template <class V>
inline bool streams_shadow(const uint16_t* shadow) {
  constexpr uintptr_t kBf16Bytes = V::kWidth * sizeof(uint16_t);
  return shadow != nullptr && reinterpret_cast<uintptr_t>(shadow) % kBf16Bytes == 0;
}

template <class V>
struct Consts {
  typename V::F grad_scale, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2,
      bias_correction2_sqrt, eps, neg_step_size;
  explicit Consts(const AdamWScalars& s)
      : grad_scale(V::set1(s.grad_scale)),
        decay_factor(V::set1(s.decay_factor)),
        beta1(V::set1(s.beta1)),
        one_minus_beta1(V::set1(s.one_minus_beta1)),
        beta2(V::set1(s.beta2)),
        one_minus_beta2(V::set1(s.one_minus_beta2)),
        bias_correction2_sqrt(V::set1(s.bias_correction2_sqrt)),
        eps(V::set1(s.eps)),
        neg_step_size(V::set1(s.neg_step_size)) {}
};

// One register of the update: m and v in, updated in place; returns the new
// parameter.
template <class V>
inline typename V::F update(const Consts<V>& c, typename V::F p, typename V::F grad,
                            typename V::F& m, typename V::F& v) {
  const auto g = V::mul(grad, c.grad_scale);
  m = V::add(V::mul(c.beta1, m), V::mul(c.one_minus_beta1, g));
  v = V::add(V::mul(c.beta2, v), V::mul(V::mul(c.one_minus_beta2, g), g));
  const auto decayed = V::mul(p, c.decay_factor);
  const auto denom = V::add(V::div(V::sqrt(v), c.bias_correction2_sqrt), c.eps);
  return V::add(decayed, V::div(V::mul(c.neg_step_size, m), denom));
}

// update() for the 8-bit states (adamw8bit_kernel.h's
// detail::update_from_sqrt_v): `sqrt_v` comes in as sqrt(v), as stored, and
// leaves as the sqrt of the new v, which the step divides by.
template <class V>
inline typename V::F update_from_sqrt_v(const Consts<V>& c, typename V::F p, typename V::F grad,
                                        typename V::F& m, typename V::F& sqrt_v) {
  const auto g = V::mul(grad, c.grad_scale);
  m = V::add(V::mul(c.beta1, m), V::mul(c.one_minus_beta1, g));
  const auto v =
      V::add(V::mul(c.beta2, V::mul(sqrt_v, sqrt_v)), V::mul(V::mul(c.one_minus_beta2, g), g));
  sqrt_v = V::sqrt(v);
  const auto decayed = V::mul(p, c.decay_factor);
  const auto denom = V::add(V::div(sqrt_v, c.bias_correction2_sqrt), c.eps);
  return V::add(decayed, V::div(V::mul(c.neg_step_size, m), denom));
}

// The scalar path's element update, for the remainder. (Every template here
// takes V, a type local to its translation unit, so no instantiation is
// shared between the AVX2 and AVX-512 files: the linker can never pick one
// compiled for the wider ISA.)
template <class V, typename Grad>
inline void update_scalar(const AdamWScalars& s, float& p, Grad grad, float& m, float& v,
                          uint16_t* shadow) {
  const float decayed = detail::moments(s, p, grad, m, v);
  p = detail::apply(s, decayed, m, std::sqrt(v));
  if (shadow != nullptr) *shadow = f32_to_bf16(p);
}

template <class V, typename Grad>
void adamw_update(const AdamWScalars& s, float* param, const Grad* grad, float* exp_avg,
                  float* exp_avg_sq, uint16_t* shadow, int64_t n) {
  const Consts<V> c(s);
  const bool stream = streams_shadow<V>(shadow);
  int64_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) {
    auto m = V::load(exp_avg + i);
    auto v = V::load(exp_avg_sq + i);
    const auto p = update(c, V::load(param + i), V::load_grad(grad + i), m, v);
    V::store(param + i, p);
    V::store(exp_avg + i, m);
    V::store(exp_avg_sq + i, v);
    if (shadow != nullptr) V::store_bf16(shadow + i, p, stream);
  }
  for (; i < n; ++i)
    update_scalar<V>(s, param[i], grad[i], exp_avg[i], exp_avg_sq[i],
                     shadow != nullptr ? shadow + i : nullptr);
  if (stream) _mm_sfence();
}

// Quantizes x[0, n) with the scale `absmax` (the block's, > 0 or 0) as
// quantize_block does; returns the scale. V::store_ranks runs
// segment_rank's operations on a register of quotients; where a lane is
// near a tie (or NaN) the register goes through the scalar
// quantize_nearest_fast instead, which settles those lanes exactly.
template <class V>
float quantize(const Code8& code, const float* x, uint8_t* out, int64_t n, float absmax) {
  if (absmax == 0.0f) {
    std::memset(out, quantize_nearest(code, 0.0f), static_cast<size_t>(n));
    return 0.0f;
  }
  const Code8Segments& segments = segments_of(code);
  const Reciprocal reciprocal(absmax);
  int64_t i = 0;
  auto vector_loop = [&](auto is_signed) {
    const auto inverse = V::set1(reciprocal.inverse);
    const auto tables = V::segment_tables(segments);
    for (; i + V::kWidth <= n; i += V::kWidth) {
      const auto y = V::mul(V::load(x + i), inverse);
      if (V::template store_ranks<decltype(is_signed)::value>(out + i, y, tables)) continue;
      alignas(64) float lanes[V::kWidth];
      V::store(lanes, y);
      for (int64_t k = 0; k < V::kWidth; ++k)
        out[i + k] = quantize_nearest_fast(segments, lanes[k]);
    }
  };
  if (reciprocal.finite) {
    if (&code == &signed_code()) {
      vector_loop(std::true_type{});
    } else {
      vector_loop(std::false_type{});
    }
  }
  for (; i < n; ++i) out[i] = quantize_nearest_fast(segments, reciprocal.of(x[i]));
  return absmax;
}

// adamw8bit_update_block in passes over the block (which stays in L1/L2):
// table lookups of the codes into the scratch m and sqrt_v; the update with
// the scales applied, keeping the new absmax; the requantization of each.
template <class V, typename Grad>
void adamw8bit_update_block(const AdamWScalars& s, float* param, const Grad* grad, uint8_t* m_codes,
                            float& m_scale, uint8_t* sqrt_v_codes, float& sqrt_v_scale, float* m,
                            float* sqrt_v, uint16_t* shadow, int64_t n) {
  const Code8& m_code = signed_code();
  const Code8& sqrt_v_code = unsigned_code();
  const auto m_table = V::lookup_table(m_code);
  const auto sqrt_v_table = V::lookup_table(sqrt_v_code);
  const Consts<V> c(s);
  const auto m_scale_v = V::set1(m_scale);
  const auto sqrt_v_scale_v = V::set1(sqrt_v_scale);
  auto m_max = V::zero();
  auto sqrt_v_max = V::zero();
  const bool stream = streams_shadow<V>(shadow);
  // One register of the update on element i, from the looked-up codes.
  auto step = [&](int64_t i, typename V::F m_looked_up, typename V::F sqrt_v_looked_up) {
    // dequantize_block: code[q] * scale
    auto mv = V::mul(m_looked_up, m_scale_v);
    auto rv = V::mul(sqrt_v_looked_up, sqrt_v_scale_v);
    const auto p = update_from_sqrt_v(c, V::load(param + i), V::load_grad(grad + i), mv, rv);
    V::store(param + i, p);
    if (shadow != nullptr) V::store_bf16(shadow + i, p, stream);
    V::store(m + i, mv);
    V::store(sqrt_v + i, rv);
    m_max = V::max(V::abs(mv), m_max);
    sqrt_v_max = V::max(V::abs(rv), sqrt_v_max);
  };
  int64_t i = 0;
  if constexpr (V::kLookupWidth > 0) {
    // The lookups (shuffles) of a run and its update (divisions) in one
    // loop, so the two kinds of work overlap.
    constexpr int64_t kRun = V::kLookupWidth;
    for (; i + kRun <= n; i += kRun) {
      alignas(64) float m_run[kRun], sqrt_v_run[kRun];
      V::lookup(m_table, m_codes + i, m_run);
      V::lookup(sqrt_v_table, sqrt_v_codes + i, sqrt_v_run);
      for (int64_t k = 0; k < kRun; k += V::kWidth)
        step(i + k, V::load(m_run + k), V::load(sqrt_v_run + k));
    }
  }
  // Scalar lookups into the scratch, for the rest (all of it without
  // register lookups: building vectors from just-stored scalars stalls on
  // store forwarding, so this is a pass of its own).
  for (int64_t k = i; k < n; ++k) {
    m[k] = m_code[m_codes[k]];
    sqrt_v[k] = sqrt_v_code[sqrt_v_codes[k]];
  }
  for (; i + V::kWidth <= n; i += V::kWidth) step(i, V::load(m + i), V::load(sqrt_v + i));
  float m_absmax = V::hmax(m_max), sqrt_v_absmax = V::hmax(sqrt_v_max);
  for (; i < n; ++i) {
    m[i] = m[i] * m_scale;
    sqrt_v[i] = sqrt_v[i] * sqrt_v_scale;
    param[i] = detail::update_from_sqrt_v(s, param[i], grad[i], m[i], sqrt_v[i]);
    if (shadow != nullptr) shadow[i] = f32_to_bf16(param[i]);
    m_absmax = std::max(m_absmax, std::abs(m[i]));
    sqrt_v_absmax = std::max(sqrt_v_absmax, std::abs(sqrt_v[i]));
  }
  if (stream) _mm_sfence();
  m_scale = quantize<V>(m_code, m, m_codes, n, m_absmax);
  sqrt_v_scale = quantize<V>(sqrt_v_code, sqrt_v, sqrt_v_codes, n, sqrt_v_absmax);
}

}  // namespace lt::optim::simd_body

// Defines kernels_simd.h's five entry points of one ISA on the vector type V
// (inside namespace lt::optim, after V).
#define LT_OPTIM_DEFINE_ISA(suffix, V)                                                            \
  void adamw_update_##suffix(const AdamWScalars& s, float* param, const float* grad,              \
                             float* exp_avg, float* exp_avg_sq, uint16_t* shadow, int64_t n) {    \
    simd_body::adamw_update<V>(s, param, grad, exp_avg, exp_avg_sq, shadow, n);                   \
  }                                                                                               \
  void adamw_update_##suffix(const AdamWScalars& s, float* param, const BFloat16* grad,           \
                             float* exp_avg, float* exp_avg_sq, uint16_t* shadow, int64_t n) {    \
    simd_body::adamw_update<V>(s, param, grad, exp_avg, exp_avg_sq, shadow, n);                   \
  }                                                                                               \
  void adamw8bit_update_block_##suffix(const AdamWScalars& s, float* param, const float* grad,    \
                                       uint8_t* m_codes, float& m_scale, uint8_t* sqrt_v_codes,   \
                                       float& sqrt_v_scale, float* m, float* sqrt_v,              \
                                       uint16_t* shadow, int64_t n) {                             \
    simd_body::adamw8bit_update_block<V>(s, param, grad, m_codes, m_scale, sqrt_v_codes,          \
                                         sqrt_v_scale, m, sqrt_v, shadow, n);                     \
  }                                                                                               \
  void adamw8bit_update_block_##suffix(const AdamWScalars& s, float* param, const BFloat16* grad, \
                                       uint8_t* m_codes, float& m_scale, uint8_t* sqrt_v_codes,   \
                                       float& sqrt_v_scale, float* m, float* sqrt_v,              \
                                       uint16_t* shadow, int64_t n) {                             \
    simd_body::adamw8bit_update_block<V>(s, param, grad, m_codes, m_scale, sqrt_v_codes,          \
                                         sqrt_v_scale, m, sqrt_v, shadow, n);                     \
  }                                                                                               \
  float quantize_block_##suffix(const Code8& code, const float* x, uint8_t* out, int64_t n,       \
                                float absmax) {                                                   \
    return simd_body::quantize<V>(code, x, out, n, absmax);                                       \
  }
