#pragma once
// Matrix products: batched matmul with transpose flags, and linear, each
// with its backward. Raw kernels: no autograd (autograd/functions.h records
// them). The CPU runs OpenBLAS; f32 and f64 compute in their own type,
// bf16/f16 compute in f32 and round the result back to the input type.
#include "core/tensor.h"

namespace lt::ops {

// op(a) @ op(b), where op transposes the last two dims when its flag is set.
// op(a): [..., M, K]; op(b): [K, N] shared by every batch, or [..., K, N]
// with a's batch dims. a and b share a dtype; the result [..., M, N] has it.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// The gradient of matmul's `a` (shaped like a, in b's dtype). It reads only
// b, so a caller may drop a when it needs no gradient for b.
Tensor matmul_backward_a(const Tensor& grad_out, const Tensor& b, bool trans_a, bool trans_b);
// The gradient of matmul's `b` (shaped like b, in a's dtype). It reads only
// a. `b_shared`: b was one [K, N] matrix for the whole batch, so its
// gradient sums over the batch.
Tensor matmul_backward_b(const Tensor& grad_out, const Tensor& a, bool trans_a, bool trans_b,
                         bool b_shared);

struct MatmulGrads {
  Tensor a, b;  // undefined when not asked for
};
MatmulGrads matmul_backward(const Tensor& grad_out, const Tensor& a, const Tensor& b, bool trans_a,
                            bool trans_b, bool need_a, bool need_b);

// y = x weight^T + bias. x: [..., in], weight: [out, in], bias: [out] or
// undefined. All share a dtype; y is [..., out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

struct LinearGrads {
  Tensor x, weight, bias;  // undefined when not asked for
};
// grad_out: [..., out]. The x gradient reads only `weight` and the weight
// gradient only `x`, so the tensor a wanted gradient does not read may be
// undefined. Gradients come back in the dtype of the tensor they belong to
// (x's gradient in weight's dtype when x is not given; they share one).
// `weight_sum`, when defined and of the shape and dtype the weight gradient
// is computed in (the weight's own on a GPU), is a running sum the weight
// gradient is added into by the GEMM (linear_weight_grad_sum); the result's
// .weight is then that tensor (Note [Weight gradients summed by the GEMM],
// autograd/engine.h).
LinearGrads linear_backward(const Tensor& grad_out, const Tensor& x, const Tensor& weight,
                            bool need_x, bool need_weight, bool need_bias,
                            const Tensor& weight_sum = Tensor());

// Linear's weight gradient (grad_out^T x, summed over rows) added into
// `sum` by the GEMM itself (beta = 1: no temporary, no second pass), for a
// caller that sums it over chunks of rows; `sum` undefined: a new one. The
// sum is in the dtype the device computes x's in (x's own on a GPU, f32 for
// half precision on the CPU): convert it to x's dtype once, at the end.
Tensor linear_weight_grad_sum(const Tensor& grad_out, const Tensor& x, Tensor sum);

}  // namespace lt::ops
