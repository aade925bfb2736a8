#pragma once
// CUDA kernels behind ops/activations.h, declared without CUDA types (see
// ops/cuda/elementwise.h). Callers have checked devices and shapes; inputs
// are f32 or bf16 on one CUDA device, computed in f32, returned in the
// dtype of x (or gate, or y), dense, on the current stream.
#include "core/tensor.h"

namespace lt::ops::cuda {

Tensor silu(const Tensor& x);
Tensor silu_backward(const Tensor& grad_out, const Tensor& x);
Tensor gelu_tanh(const Tensor& x);
Tensor gelu_tanh_backward(const Tensor& grad_out, const Tensor& x);
Tensor swiglu(const Tensor& gate, const Tensor& up);
Tensor swiglu_backward_gate(const Tensor& grad_out, const Tensor& gate, const Tensor& up);
Tensor swiglu_backward_up(const Tensor& grad_out, const Tensor& gate);

// Softmax along the last dimension, and its backward from the output y.
Tensor softmax_last(const Tensor& x);
Tensor softmax_backward_last(const Tensor& grad_out, const Tensor& y);

}  // namespace lt::ops::cuda
