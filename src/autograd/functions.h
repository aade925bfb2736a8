#pragma once
// The differentiable functions: the building blocks of nn/ and models/.
// Each runs its raw op from ops/ and, when grad mode is on and an input
// requires grad, records a node whose backward calls the op's backward.
// Shapes use [B, T, ...] = batch, sequence, ...; dtypes follow the inputs.
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace lt {

// ---- elementwise, reductions, casts (autograd/fn_elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);  // numpy broadcasting
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& a, double s);
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor sum(const Tensor& a);  // all elements, 0-dim
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& a);
Tensor cast(const Tensor& a, DType dtype);  // gradient is cast back to a's dtype

// ---- views (autograd/fn_views.cpp): same semantics as the raw Tensor methods ----
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor transpose(const Tensor& a, int64_t d0, int64_t d1);
Tensor permute(const Tensor& a, const std::vector<int64_t>& order);
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end);
Tensor expand(const Tensor& a, const Shape& shape);
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor contiguous(const Tensor& a);

// ---- matmul and linear (autograd/fn_matmul.cpp) ----
// a: [..., M, K] (or [..., K, M] with trans_a), b: [K, N] shared by every
// batch, or [..., K, N] with the same batch dims as a (or [N, K] / [..., N, K]
// with trans_b). Result [..., M, N].
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// y = x W^T + bias. x: [..., in], weight: [out, in], bias: [out] or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// residual + linear(x, weight, bias) on the tape, its value never written:
// for a caller that backpropagates through the sum but does not read it (the
// streaming executor rebuilding a block's saved tensors for its backward).
// The gradients need only x and weight, so the GEMM and the add are skipped.
// With no graph to record (grad mode off, no input needing grad, tracing) it
// computes the value, as add(residual, linear(x, weight, bias)).
Tensor residual_linear_unread(const Tensor& residual, const Tensor& x, const Tensor& weight,
                              const Tensor& bias = Tensor());

// ---- activations and softmax (autograd/fn_activations.cpp) ----
Tensor silu(const Tensor& x);
Tensor gelu_tanh(const Tensor& x);                    // GPT-2's "gelu_new" / approximate="tanh"
Tensor swiglu(const Tensor& gate, const Tensor& up);  // silu(gate) * up
Tensor softmax(const Tensor& x, int64_t dim = -1);

// ---- embedding, norms, rotary, loss (autograd/fn_layers.cpp) ----
// weight [V, C], ids integer (i32 or i64) of any shape -> [..., C].
Tensor embedding(const Tensor& weight, const Tensor& ids);
// Over the last dim, statistics in fp32 (f64 for f64): x * rsqrt(mean(x^2) + eps) * weight.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// weight and bias [C]; bias may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

// Rotary position embedding tables, computed in float64 from the
// frequencies, as Hugging Face computes inv_freq (default and "llama3").
struct RopeScaling {
  std::string type = "default";  // "default" or "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};
struct RopeTable {
  Tensor cos;  // [max_positions, head_dim / 2], f64 (ops convert)
  Tensor sin;
  int64_t head_dim = 0;
};
RopeTable make_rope_table(int64_t head_dim, int64_t max_positions, double theta,
                          const RopeScaling& scaling = {});
// x: [B, T, H, D] with D = head_dim, positions 0..T-1 (or `positions` [T]
// i64 when given). Hugging Face's rotate_half convention: the first and
// second halves of D form the pairs.
Tensor rotary_embedding(const Tensor& x, const RopeTable& table,
                        const Tensor& positions = Tensor());

// logits [N, V] (any floating dtype; computed in fp32), targets [N] integer.
// Mean over targets != ignore_index; 0 when none count.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

// The language-model loss fused with its projection (autograd/fn_lm_loss.cpp):
// sum over rows of cross_entropy(hidden @ weight^T, targets) / loss_denominator,
// computed in row chunks so the [N, V] logits never exist at once (backward
// recomputes them). hidden [N, C], weight [V, C], targets [N] integer.
Tensor lm_head_loss(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                    double loss_denominator, int64_t ignore_index = -100);

// ---- attention (autograd/fn_attention.cpp) ----
// Causal self-attention with grouped-query heads. q: [B, T, Hq, D],
// k and v: [B, T, Hkv, D], Hq a multiple of Hkv. Result [B, T, Hq, D].
// `softmax_scale` defaults to 1/sqrt(D).
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                        std::optional<double> softmax_scale = std::nullopt);

}  // namespace lt
