#pragma once
// The AVX2 and AVX-512 paths of the CPU optimizer kernels, and the run-time
// choice between them and the scalar ones (adamw_kernel.h,
// adamw8bit_kernel.h). Each vector path performs exactly the scalar path's
// f32 operations per element (same order, no FMA, IEEE division and square
// root), rounds the bf16 shadow the same way and picks the same 8-bit code,
// so all three give bitwise the same parameters, states and shadows.
//
// The vector kernels are defined in kernels_avx2.cpp and kernels_avx512.cpp,
// each compiled for its instruction set (a target pragma there), from the
// one template body in kernels_simd_body.h. Call them only when
// isa_supported() says so; the dispatchers below do.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "optim/adamw8bit_kernel.h"
#include "optim/adamw_kernel.h"
#include "optim/simd.h"

// The vector kernels exist on x86-64 with GCC or Clang (target pragmas,
// __builtin_cpu_supports); elsewhere only the scalar path is built.
#if defined(__x86_64__) && defined(__GNUC__)
#define LT_OPTIM_X86_KERNELS 1
#else
#define LT_OPTIM_X86_KERNELS 0
#endif

namespace lt::optim {

#if LT_OPTIM_X86_KERNELS
#define LT_OPTIM_DECLARE_ISA(suffix)                                                              \
  void adamw_update_##suffix(const AdamWScalars& s, float* param, const float* grad,              \
                             float* exp_avg, float* exp_avg_sq, uint16_t* shadow, int64_t n);     \
  void adamw_update_##suffix(const AdamWScalars& s, float* param, const BFloat16* grad,           \
                             float* exp_avg, float* exp_avg_sq, uint16_t* shadow, int64_t n);     \
  void adamw8bit_update_block_##suffix(const AdamWScalars& s, float* param, const float* grad,    \
                                       uint8_t* m_codes, float& m_scale, uint8_t* sqrt_v_codes,   \
                                       float& sqrt_v_scale, float* m, float* sqrt_v,              \
                                       uint16_t* shadow, int64_t n);                              \
  void adamw8bit_update_block_##suffix(const AdamWScalars& s, float* param, const BFloat16* grad, \
                                       uint8_t* m_codes, float& m_scale, uint8_t* sqrt_v_codes,   \
                                       float& sqrt_v_scale, float* m, float* sqrt_v,              \
                                       uint16_t* shadow, int64_t n);                              \
  float quantize_block_##suffix(const Code8& code, const float* x, uint8_t* out, int64_t n,       \
                                float absmax);
LT_OPTIM_DECLARE_ISA(avx2)
LT_OPTIM_DECLARE_ISA(avx512)
#undef LT_OPTIM_DECLARE_ISA
#endif

// adamw_update on the chosen instruction set (see adamw_kernel.h).
template <typename Grad>
void adamw_update(Isa isa, const AdamWScalars& s, float* param, const Grad* grad, float* exp_avg,
                  float* exp_avg_sq, uint16_t* shadow, int64_t n) {
#if LT_OPTIM_X86_KERNELS
  if (isa == Isa::kAvx512)
    return adamw_update_avx512(s, param, grad, exp_avg, exp_avg_sq, shadow, n);
  if (isa == Isa::kAvx2) return adamw_update_avx2(s, param, grad, exp_avg, exp_avg_sq, shadow, n);
#else
  (void)isa;
#endif
  adamw_update(s, param, grad, exp_avg, exp_avg_sq, shadow, n);
}

// adamw8bit_update_block on the chosen instruction set (adamw8bit_kernel.h).
template <typename Grad>
void adamw8bit_update_block(Isa isa, const AdamWScalars& s, float* param, const Grad* grad,
                            uint8_t* m_codes, float& m_scale, uint8_t* sqrt_v_codes,
                            float& sqrt_v_scale, float* m, float* sqrt_v, uint16_t* shadow,
                            int64_t n) {
#if LT_OPTIM_X86_KERNELS
  if (isa == Isa::kAvx512)
    return adamw8bit_update_block_avx512(s, param, grad, m_codes, m_scale, sqrt_v_codes,
                                         sqrt_v_scale, m, sqrt_v, shadow, n);
  if (isa == Isa::kAvx2)
    return adamw8bit_update_block_avx2(s, param, grad, m_codes, m_scale, sqrt_v_codes, sqrt_v_scale,
                                       m, sqrt_v, shadow, n);
#else
  (void)isa;
#endif
  adamw8bit_update_block(s, param, grad, m_codes, m_scale, sqrt_v_codes, sqrt_v_scale, m, sqrt_v,
                         shadow, n);
}

// quantize_block on the chosen instruction set (the same ranks and scale).
inline float quantize_block(Isa isa, const Code8& code, const float* x, uint8_t* out, int64_t n) {
#if LT_OPTIM_X86_KERNELS
  if (isa != Isa::kScalar) {
    float absmax = 0.0f;
    for (int64_t i = 0; i < n; ++i) absmax = std::max(absmax, std::abs(x[i]));
    return isa == Isa::kAvx512 ? quantize_block_avx512(code, x, out, n, absmax)
                               : quantize_block_avx2(code, x, out, n, absmax);
  }
#else
  (void)isa;
#endif
  return quantize_block(code, x, out, n);
}

}  // namespace lt::optim
