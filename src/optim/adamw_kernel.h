#pragma once
// The fused AdamW update over one contiguous run of elements: decoupled
// weight decay, both moments and the parameter update in a single pass, so
// each of p, g, m, v is read once and p, m, v written once (28 bytes per
// parameter with f32 gradients, 22 with bf16: the pass is memory-bound).
//
// Operation order follows torch.optim.AdamW's single-tensor path, with every
// scalar rounded to f32 as PyTorch rounds a Python scalar for an f32 kernel:
//
//   g  = grad * grad_scale                    (clip_grad_norm_'s in-place mul)
//   p  = p * (1 - lr * weight_decay)          (param.mul_)
//   m  = b1 * m + (1 - b1) * g                (exp_avg.lerp_, equal in exact arithmetic)
//   v  = b2 * v + (1 - b2) * g * g            (exp_avg_sq.mul_().addcmul_())
//   p  = p + (-step_size * m) / (sqrt(v) / sqrt(1 - b2^t) + eps)
//        with step_size = lr / (1 - b1^t)     (param.addcdiv_)
//
// PyTorch's own paths (single-tensor, foreach, fused) differ from each other
// in the last bit (its vectorized lerp uses an FMA), so the contract with
// PyTorch is agreement to f32 rounding, not bit equality. Within lazytrain
// the result is bitwise independent of thread count and chunking: every
// element is updated alone, and the vector and scalar paths below perform
// the same IEEE operations (baseline x86-64 has no FMA for the compiler to
// contract into; the AVX2/AVX-512 files, whose targets have it, turn
// contraction off).
//
// Vectorization: the build compiles at -O2 with the default math-errno, and
// GCC then guards every std::sqrt with an errno branch, which stops the
// loop vectorizer. The square root therefore goes through sqrt_lanes (SSE
// sqrtps on x86-64; the argument, v, is never negative). The remaining
// loops have a constant trip count (kLanes), which -O2's "very cheap" cost
// model vectorizes fully. kernels_simd.h adds AVX2/AVX-512 paths chosen at run time.
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__SSE__)
#include <immintrin.h>
#endif

#include "core/dtype.h"

namespace lt::optim {

// Per-step, per-parameter scalars, already rounded to f32 (see above).
struct AdamWScalars {
  float grad_scale = 1.0f;
  float decay_factor = 1.0f;  // 1 - lr * weight_decay
  float beta1 = 0.9f;
  float one_minus_beta1 = 0.1f;
  float beta2 = 0.999f;
  float one_minus_beta2 = 0.001f;
  float bias_correction2_sqrt = 1.0f;  // sqrt(1 - beta2^t)
  float eps = 1e-8f;
  float neg_step_size = 0.0f;  // -lr / (1 - beta1^t)
};

// Computes the scalars for update number `t` (1-based) of one parameter, in
// double as PyTorch does in Python, then rounds each to f32 once.
inline AdamWScalars adamw_scalars(double lr, double beta1, double beta2, double eps,
                                  double weight_decay, double grad_scale, int64_t t) {
  const double td = static_cast<double>(t);
  AdamWScalars s;
  s.grad_scale = static_cast<float>(grad_scale);
  s.decay_factor = static_cast<float>(1.0 - lr * weight_decay);
  s.beta1 = static_cast<float>(beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, td)));
  s.eps = static_cast<float>(eps);
  s.neg_step_size = static_cast<float>(-lr / (1.0 - std::pow(beta1, td)));
  return s;
}

namespace detail {

// Elements per block of the vectorized loop: a multiple of every SIMD width
// (4, 8, 16 floats), small enough to stay in registers/L1.
constexpr int64_t kLanes = 16;

inline float widen(float g) {
  return g;
}
inline float widen(BFloat16 g) {
  return bf16_to_f32(g.bits);
}

// out[j] = sqrt(in[j]) for j < kLanes; in[j] >= 0 (it is v).
inline void sqrt_lanes(const float* in, float* out) {
#if defined(__SSE__)
  for (int64_t j = 0; j < kLanes; j += 4) _mm_storeu_ps(out + j, _mm_sqrt_ps(_mm_loadu_ps(in + j)));
#else
  for (int64_t j = 0; j < kLanes; ++j) out[j] = std::sqrt(in[j]);
#endif
}

// Everything up to the square root for element j; leaves m and v updated
// and returns the decayed parameter.
template <typename Grad>
inline float moments(const AdamWScalars& s, float p, Grad grad, float& m, float& v) {
  const float g = widen(grad) * s.grad_scale;
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * g * g;
  return p * s.decay_factor;
}

inline float apply(const AdamWScalars& s, float decayed_p, float m, float sqrt_v) {
  return decayed_p + (s.neg_step_size * m) / (sqrt_v / s.bias_correction2_sqrt + s.eps);
}

}  // namespace detail

// Updates n elements in place. Grad is float or BFloat16 (widened exactly).
// `shadow`, when not null, receives the bf16 (round to nearest even) of each
// new parameter value in the same pass. The arrays must not overlap. This is
// the scalar path; kernels_simd.h has the AVX2/AVX-512 ones.
template <typename Grad>
void adamw_update(const AdamWScalars& s, float* __restrict param, const Grad* __restrict grad,
                  float* __restrict exp_avg, float* __restrict exp_avg_sq,
                  uint16_t* __restrict shadow, int64_t n) {
  using detail::kLanes;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    float* p = param + i;
    float* m = exp_avg + i;
    float* v = exp_avg_sq + i;
    const Grad* g = grad + i;
    float decayed[kLanes];
    float root[kLanes];
    for (int64_t j = 0; j < kLanes; ++j) decayed[j] = detail::moments(s, p[j], g[j], m[j], v[j]);
    detail::sqrt_lanes(v, root);
    for (int64_t j = 0; j < kLanes; ++j) p[j] = detail::apply(s, decayed[j], m[j], root[j]);
    if (shadow != nullptr)
      for (int64_t j = 0; j < kLanes; ++j) shadow[i + j] = f32_to_bf16(p[j]);
  }
  for (; i < n; ++i) {
    const float decayed = detail::moments(s, param[i], grad[i], exp_avg[i], exp_avg_sq[i]);
    param[i] = detail::apply(s, decayed, exp_avg[i], std::sqrt(exp_avg_sq[i]));
    if (shadow != nullptr) shadow[i] = f32_to_bf16(param[i]);
  }
}

// Without a bf16 shadow.
template <typename Grad>
void adamw_update(const AdamWScalars& s, float* __restrict param, const Grad* __restrict grad,
                  float* __restrict exp_avg, float* __restrict exp_avg_sq, int64_t n) {
  adamw_update(s, param, grad, exp_avg, exp_avg_sq, nullptr, n);
}

}  // namespace lt::optim
