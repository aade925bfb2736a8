#pragma once
// Attention, MLP and the pre-norm decoder block shared by every family:
//   h = x + o_proj(attention(rope(q_proj(n1(x))), rope(k_proj(n1(x))), v_proj(n1(x))))
//   y = h + mlp(n2(h))
// Families differ only in the options below (see models/).
#include <memory>

#include "nn/layers.h"

namespace lt::nn {

enum class MlpKind { SwiGLU, GeluTanh };

struct BlockOptions {
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool qkv_bias = false;  // Qwen2, GPT-2
  bool out_bias = false;  // attention output projection (GPT-2)
  bool mlp_bias = false;  // MLP projections (GPT-2; Llama's mlp_bias)
  bool qk_norm = false;   // Qwen3: RMSNorm over head_dim on q and k before RoPE
  bool use_rope = true;   // GPT-2 has learned positions instead
  NormKind norm = NormKind::RMS;
  MlpKind mlp = MlpKind::SwiGLU;
  double norm_eps = 1e-6;
  double init_std = 0.02;
};

struct Attention {
  BlockOptions options;
  Linear q_proj, k_proj, v_proj, o_proj;
  Norm q_norm, k_norm;  // only with qk_norm

  Attention() = default;
  Attention(const BlockOptions& options, Generator* gen, DType dtype, const std::string& name);
  // x: [B, T, hidden]; rope may be null when options.use_rope is false.
  Tensor forward(const Tensor& x, const RopeTable* rope) const;
  void collect(const std::string& prefix, NamedParameters& out) const;
};

struct Mlp {
  MlpKind kind = MlpKind::SwiGLU;
  Linear gate_proj, up_proj, down_proj;  // SwiGLU; GELU uses up_proj and down_proj

  Mlp() = default;
  Mlp(const BlockOptions& options, Generator* gen, DType dtype, const std::string& name);
  Tensor forward(const Tensor& x) const;     // down_proj(activation(x))
  Tensor activation(const Tensor& x) const;  // down_proj's input
  void collect(const std::string& prefix, NamedParameters& out) const;
};

struct DecoderBlock {
  Norm input_norm, post_attention_norm;
  Attention attention;
  Mlp mlp;

  DecoderBlock() = default;
  DecoderBlock(const BlockOptions& options, Generator* gen, DType dtype, const std::string& name);
  // With output_unread, the result is for backward only, its value never
  // written (residual_linear_unread): down_proj's GEMM and the residual add
  // after it are skipped, as their gradients need only their inputs.
  Tensor forward(const Tensor& x, const RopeTable* rope, bool output_unread = false) const;
  // Names: input_norm.*, attention.{q,k,v,o}_proj.*, attention.{q,k}_norm.*,
  // post_attention_norm.*, mlp.{gate,up,down}_proj.*
  void collect(const std::string& prefix, NamedParameters& out) const;
};

}  // namespace lt::nn
