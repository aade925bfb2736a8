#pragma once
// The per-element AdamW update of optim/adamw_kernel.h (detail::moments and
// detail::apply) for CUDA kernels, shared by adamw.cu and adamw8bit.cu.
// Spelled with _rn intrinsics: nvcc contracts a * b + c into an FMA by
// default, which would round differently from the CPU; the intrinsics are
// never contracted, so a GPU update matches the CPU one bit for bit.
#include <cuda_bf16.h>

#include "optim/adamw_kernel.h"

namespace lt::optim::cuda {

__device__ __forceinline__ void update_one(const AdamWScalars& s, float& p, float grad, float& m,
                                           float& v) {
  const float g = __fmul_rn(grad, s.grad_scale);
  m = __fadd_rn(__fmul_rn(s.beta1, m), __fmul_rn(s.one_minus_beta1, g));
  v = __fadd_rn(__fmul_rn(s.beta2, v), __fmul_rn(__fmul_rn(s.one_minus_beta2, g), g));
  const float decayed = __fmul_rn(p, s.decay_factor);
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bias_correction2_sqrt), s.eps);
  p = __fadd_rn(decayed, __fdiv_rn(__fmul_rn(s.neg_step_size, m), denom));
}

__device__ __forceinline__ float widen(float g) {
  return g;
}
__device__ __forceinline__ float widen(__nv_bfloat16 g) {
  return __bfloat162float(g);
}

}  // namespace lt::optim::cuda
