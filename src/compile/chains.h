#pragma once
// Named chains as kernel graphs: what the hand-written fused kernels in
// ops/ compute, written in the compiler's IR, so that tests can hold one
// against the other and a fusion pass can start from known patterns. Each
// follows its ops/ counterpart's roundings (ops/activations.h, ops/norm.h).
#include "compile/graph.h"

namespace lt::compile {

// inputs: gate, up (Full, `dtype`); output: silu(gate) * up (Full,
// `dtype`), rounded once as ops::swiglu does.
KernelGraph swiglu_forward(DType dtype);

// GPT-2's gelu_new (ops::gelu_tanh), 0.5 x (1 + tanh(sqrt(2/pi) (x +
// 0.044715 x^3))), of `x` in `g`, in f32. Written as the same function
// x sigmoid(2 sqrt(2/pi) x (1 + 0.044715 x^2)) (0.5 (1 + tanh(u)) =
// sigmoid(2u)): one exponential and one reciprocal and no cancellation,
// where 1 + tanh(u) loses all its digits as u goes below -9 (the GPU's
// tanh alone is twice the instructions).
Value gelu_tanh(KernelGraph& g, Value x);

// input: x (Full, `dtype`); output: gelu_tanh(x), rounded once.
KernelGraph gelu_tanh_forward(DType dtype);

// input: x (Full, `dtype`); output: softmax along the row (ops::softmax),
// exp(x - max) / sum(exp(x - max)), rounded once.
KernelGraph softmax_forward(DType dtype);

// inputs: x, residual (Full, `dtype`), weight (Col, `dtype`); outputs:
//   h    = x + residual, rounded to `dtype` (the next residual stream)
//   y    = weight * round(h * rstd), rounded to `dtype` (ops::rms_norm)
//   rstd = rsqrt(mean(h^2) + eps) (Row, f32)
KernelGraph residual_rms_norm_forward(DType dtype, double eps);

// inputs: x (Full, `dtype`), weight, bias (Col, `dtype`); outputs:
//   y    = (x - mean) * rstd * weight + bias, rounded to `dtype`
//   rstd = rsqrt(mean((x - mean)^2) + eps) (Row, f32)
// The fusion pass's layer_norm (autograd/fused_chain.cpp), in f32 to the end.
KernelGraph layer_norm_forward(DType dtype, double eps);

}  // namespace lt::compile
