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
//
// bf16 calls that the flash kernels take go first to cuDNN's fused
// attention (attention_cudnn.h) when the build has cuDNN and it accepts the
// problem. LT_ATTENTION chooses: "auto" (default) uses cuDNN when it works
// and says once on stderr why it fell back to the flash kernels; "own"
// never uses cuDNN; "cudnn" requires it for those calls and fails with
// cuDNN's reason otherwise. Both paths produce the same lse (natural-log
// log-sum-exp of the scaled scores), so either backward takes either
// forward's lse.
#include "ops/attention.h"

namespace lt::ops::cuda {

// Which implementation ran the calling thread's last forward / backward
// (for tests and the benchmark).
enum class AttentionPath { kNone, kRows, kFlash, kCudnn };
AttentionPath last_forward_path();
AttentionPath last_backward_path();

AttentionForward causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                          double scale);

AttentionGrads causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                         const Tensor& v, const Tensor& out, const Tensor& lse,
                                         double scale);

}  // namespace lt::ops::cuda
