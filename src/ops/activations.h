#pragma once
// Activations and softmax, each with its backward. Raw kernels: no autograd
// (autograd/functions.h records them). f32 and f64 compute in their own
// type; bf16/f16 compute in f32 and round the result back to the input type.
#include "core/tensor.h"

namespace lt::ops {

// silu(x) = x * sigmoid(x).
Tensor silu(const Tensor& x);
Tensor silu_backward(const Tensor& grad_out, const Tensor& x);

// GPT-2's "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
Tensor gelu_tanh(const Tensor& x);
Tensor gelu_tanh_backward(const Tensor& grad_out, const Tensor& x);

// silu(gate) * up; gate and up have one shape and dtype (no broadcasting).
Tensor swiglu(const Tensor& gate, const Tensor& up);
struct SwigluGrads {
  Tensor gate, up;  // undefined when not asked for
};
// The up gradient reads only `gate`, so `up` may be undefined when the gate
// gradient is not needed.
SwigluGrads swiglu_backward(const Tensor& grad_out, const Tensor& gate, const Tensor& up,
                            bool need_gate, bool need_up);

// exp(x - max) / sum(exp(x - max)) along `dim`: subtracting the max keeps
// exp from overflowing. Sums accumulate in double.
Tensor softmax(const Tensor& x, int64_t dim = -1);
// From the forward's output y: dx = y * (g - sum(g * y)) along `dim`.
Tensor softmax_backward(const Tensor& grad_out, const Tensor& y, int64_t dim = -1);

}  // namespace lt::ops
