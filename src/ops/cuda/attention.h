#pragma once
// CUDA kernels behind ops/attention.h, declared without CUDA types so that
// ops/attention.cpp includes this in every build; defined only when
// LT_WITH_CUDA. The caller has checked shapes, dtypes and devices.
//
// bf16 with head_dim 64 or 128 runs flash-attention-2 style tensor-core
// kernels (attention_fwd.cu, attention_bwd.cu): bf16 operands, f32
// accumulation and softmax statistics, nothing T x T in memory. Every other
// case (f32 inputs, other head sizes, unaligned views) runs a one-warp-per-row
// kernel in f32 (attention_rows.cu): simple, exact to f32 rounding, slow.
// lse is always f32 on the GPU.
#include "ops/attention.h"

namespace lt::ops::cuda {

AttentionForward causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                          double scale);

AttentionGrads causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                         const Tensor& v, const Tensor& out, const Tensor& lse,
                                         double scale);

}  // namespace lt::ops::cuda
