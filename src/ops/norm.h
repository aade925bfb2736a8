#pragma once
// Row normalizations over the last dimension: RMSNorm (Llama, Qwen,
// Mistral) and LayerNorm (GPT-2). Raw kernels: no autograd (see
// autograd/functions.h for that).
//
// x is [..., C]; a "row" is one C-vector. Half-precision inputs are widened
// row by row to f32 and results rounded back, so no full f32 copy of x is
// made; f64 computes in f64. Row sums accumulate in double. The per-row
// statistics the forward returns ([...] = x.shape() without C, in the
// compute dtype) are what the backward needs besides x.
#include "core/tensor.h"

namespace lt::ops {

struct RmsNormOutput {
  Tensor y;     // x's shape and dtype
  Tensor rstd;  // 1 / sqrt(mean(x^2) + eps) per row
};
// Exactly Hugging Face's LlamaRMSNorm: n = x * rsqrt(mean(x^2) + eps) in
// f32, rounded to x's dtype, then y = weight * n rounded to x's dtype.
// weight: [C], same dtype as x.
RmsNormOutput rms_norm(const Tensor& x, const Tensor& weight, double eps);

struct RmsNormGrads {
  Tensor dx;       // undefined unless asked for
  Tensor dweight;  // undefined unless asked for
};
// The rounding of n to x's dtype is taken as identity (as autograd treats a
// cast), so half-precision gradients are those of the f32 computation.
RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                               const Tensor& rstd, bool need_dx, bool need_dweight);

struct LayerNormOutput {
  Tensor y;     // x's shape and dtype
  Tensor mean;  // per row
  Tensor rstd;  // 1 / sqrt(var + eps) per row, var biased (divides by C)
};
// As torch.nn.LayerNorm: y = (x - mean) * rstd * weight + bias, computed in
// f32 and rounded once. weight and bias: [C] in x's dtype, or undefined
// (then 1 and 0).
LayerNormOutput layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

struct LayerNormGrads {
  Tensor dx;
  Tensor dweight;
  Tensor dbias;
};
LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& rstd, bool need_dx,
                                   bool need_dweight, bool need_dbias);

}  // namespace lt::ops
