#pragma once
// CUDA kernels behind ops/norm.h, declared without CUDA types (see
// ops/cuda/elementwise.h). The caller has checked shapes, dtypes and
// devices; x is f32 or bf16, the statistics are f32, one block per row.
// Weight and bias gradients are deterministic column sums over the rows
// (see Note [deterministic column sums] in ops/cuda/column_sum.cuh).
#include "ops/norm.h"

namespace lt::ops::cuda {

RmsNormOutput rms_norm(const Tensor& x, const Tensor& weight, double eps);
RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                               const Tensor& rstd, bool need_dx, bool need_dweight);

LayerNormOutput layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& rstd, bool need_dx,
                                   bool need_dweight, bool need_dbias);

}  // namespace lt::ops::cuda
