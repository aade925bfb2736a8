#include "nn/block.h"

namespace lt::nn {

Attention::Attention(const BlockOptions& o, Generator* gen, DType dtype, const std::string& name)
    : options(o),
      q_proj(o.hidden, o.num_heads * o.head_dim, o.qkv_bias, gen, dtype, join(name, "q_proj"),
             o.init_std),
      k_proj(o.hidden, o.num_kv_heads * o.head_dim, o.qkv_bias, gen, dtype, join(name, "k_proj"),
             o.init_std),
      v_proj(o.hidden, o.num_kv_heads * o.head_dim, o.qkv_bias, gen, dtype, join(name, "v_proj"),
             o.init_std),
      o_proj(o.num_heads * o.head_dim, o.hidden, o.out_bias, gen, dtype, join(name, "o_proj"),
             o.init_std) {
  LT_CHECK(o.num_kv_heads > 0 && o.num_heads % o.num_kv_heads == 0, "attention: ", o.num_heads,
           " query heads are not a multiple of ", o.num_kv_heads, " key/value heads");
  if (o.qk_norm) {
    q_norm = Norm(NormKind::RMS, o.head_dim, o.norm_eps, dtype, join(name, "q_norm"));
    k_norm = Norm(NormKind::RMS, o.head_dim, o.norm_eps, dtype, join(name, "k_norm"));
  }
}

Tensor Attention::forward(const Tensor& x, const RopeTable* rope) const {
  const int64_t b = x.size(0), t = x.size(1);
  const auto& o = options;
  Tensor q = reshape(q_proj.forward(x), {b, t, o.num_heads, o.head_dim});
  Tensor k = reshape(k_proj.forward(x), {b, t, o.num_kv_heads, o.head_dim});
  Tensor v = reshape(v_proj.forward(x), {b, t, o.num_kv_heads, o.head_dim});
  if (o.qk_norm) {
    q = q_norm.forward(q);
    k = k_norm.forward(k);
  }
  if (o.use_rope) {
    LT_CHECK(rope != nullptr, "attention with RoPE needs a rope table");
    ops::OpProfileScope profile("forward rope", q.device());
    q = rotary_embedding(q, *rope);
    k = rotary_embedding(k, *rope);
  }
  Tensor a;
  {
    ops::OpProfileScope profile("forward attention", q.device());
    a = causal_attention(q, k, v);
  }
  return o_proj.forward(reshape(a, {b, t, o.num_heads * o.head_dim}));
}

void Attention::collect(const std::string& prefix, NamedParameters& out) const {
  q_proj.collect(join(prefix, "q_proj"), out);
  k_proj.collect(join(prefix, "k_proj"), out);
  v_proj.collect(join(prefix, "v_proj"), out);
  o_proj.collect(join(prefix, "o_proj"), out);
  if (options.qk_norm) {
    q_norm.collect(join(prefix, "q_norm"), out);
    k_norm.collect(join(prefix, "k_norm"), out);
  }
}

Mlp::Mlp(const BlockOptions& o, Generator* gen, DType dtype, const std::string& name)
    : kind(o.mlp) {
  if (kind == MlpKind::SwiGLU) {
    gate_proj = Linear(o.hidden, o.intermediate, o.mlp_bias, gen, dtype, join(name, "gate_proj"),
                       o.init_std);
  }
  up_proj =
      Linear(o.hidden, o.intermediate, o.mlp_bias, gen, dtype, join(name, "up_proj"), o.init_std);
  down_proj =
      Linear(o.intermediate, o.hidden, o.mlp_bias, gen, dtype, join(name, "down_proj"), o.init_std);
}

Tensor Mlp::activation(const Tensor& x) const {
  if (kind == MlpKind::SwiGLU) {
    Tensor gate = gate_proj.forward(x), up = up_proj.forward(x);
    ops::OpProfileScope profile("forward activation", x.device());
    return swiglu(gate, up);
  }
  Tensor up = up_proj.forward(x);
  ops::OpProfileScope profile("forward activation", x.device());
  return gelu_tanh(up);
}

Tensor Mlp::forward(const Tensor& x) const {
  return down_proj.forward(activation(x));
}

void Mlp::collect(const std::string& prefix, NamedParameters& out) const {
  if (kind == MlpKind::SwiGLU) gate_proj.collect(join(prefix, "gate_proj"), out);
  up_proj.collect(join(prefix, "up_proj"), out);
  down_proj.collect(join(prefix, "down_proj"), out);
}

DecoderBlock::DecoderBlock(const BlockOptions& o, Generator* gen, DType dtype,
                           const std::string& name)
    : input_norm(o.norm, o.hidden, o.norm_eps, dtype, join(name, "input_norm")),
      post_attention_norm(o.norm, o.hidden, o.norm_eps, dtype, join(name, "post_attention_norm")),
      attention(o, gen, dtype, join(name, "attention")),
      mlp(o, gen, dtype, join(name, "mlp")) {}

Tensor DecoderBlock::forward(const Tensor& x, const RopeTable* rope, bool output_unread) const {
  auto residual = [](const Tensor& a, const Tensor& b) {
    ops::OpProfileScope profile("forward residual add", a.device());
    return add(a, b);
  };
  Tensor h = residual(x, attention.forward(input_norm.forward(x), rope));
  Tensor a = mlp.activation(post_attention_norm.forward(h));
  const Linear& down = mlp.down_proj;
  if (output_unread) return residual_linear_unread(h, a, down.weight, down.bias);
  return residual(h, down.forward(a));
}

void DecoderBlock::collect(const std::string& prefix, NamedParameters& out) const {
  input_norm.collect(join(prefix, "input_norm"), out);
  attention.collect(join(prefix, "attention"), out);
  post_attention_norm.collect(join(prefix, "post_attention_norm"), out);
  mlp.collect(join(prefix, "mlp"), out);
}

}  // namespace lt::nn
