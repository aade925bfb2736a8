#pragma once
// Causal self-attention with grouped-query heads, forward and backward.
// Raw kernels: no autograd (lt::causal_attention in autograd/functions.h
// records the node).
//
// Layout: q [B, T, Hq, D], k and v [B, T, Hkv, D], Hq a multiple of Hkv.
// Query head h reads kv head h / (Hq / Hkv), as Hugging Face's repeat_kv
// lays the copies out. Query position i attends to keys 0..i.
//
// Nothing T x T is kept between forward and backward: the forward saves the
// log-sum-exp of each score row, and the backward recomputes the
// probabilities from q, k and that log-sum-exp (as FlashAttention does).
// bf16/f16 inputs compute in f32 and results keep the input dtype; f64
// computes in f64 (for gradient checks).
#include "core/tensor.h"

namespace lt::ops {

struct AttentionForward {
  Tensor out;  // [B, T, Hq, D], q's dtype
  // [B, Hq, T]: log(sum_j exp(scale * q_i . k_j)) over j <= i. f32, or f64
  // for f64 inputs.
  Tensor lse;
};

struct AttentionGrads {
  Tensor dq;  // like q
  Tensor dk;  // like k; summed over the query heads that share each kv head
  Tensor dv;  // like v
};

// `scale` multiplies the scores q . k before the softmax (usually 1/sqrt(D)).
AttentionForward causal_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                          double scale);

// `out` and `lse` are what causal_attention_forward returned for these q, k, v
// and scale; `dout` is the gradient of `out`.
AttentionGrads causal_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                         const Tensor& v, const Tensor& out, const Tensor& lse,
                                         double scale);

}  // namespace lt::ops
