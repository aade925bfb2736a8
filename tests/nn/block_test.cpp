// The decoder block composes many ops; its gradient as a whole is checked
// against float64 finite differences for every family's options.
#include <gtest/gtest.h>

#include "autograd/functions.h"
#include "nn/block.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

nn::BlockOptions small_options() {
  nn::BlockOptions o;
  o.hidden = 8;
  o.intermediate = 12;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.head_dim = 4;
  o.norm_eps = 1e-5;
  o.init_std = 0.3;  // larger than 0.02 so every path carries signal
  return o;
}

nn::BlockOptions gpt2_options() {
  auto o = small_options();
  o.num_kv_heads = o.num_heads;
  o.qkv_bias = true;
  o.out_bias = true;
  o.mlp_bias = true;
  o.use_rope = false;
  o.norm = nn::NormKind::Layer;
  o.mlp = nn::MlpKind::GeluTanh;
  return o;
}

// Checks d(block(x))/d(x and every parameter) by central differences.
// With output_unread the analytic gradients come from the forward that
// skips down_proj's GEMM; gradcheck's differences run without grad mode,
// where the block computes its output in full.
void check_block(const nn::BlockOptions& o, bool output_unread = false) {
  Generator gen(42);
  nn::DecoderBlock block(o, &gen, DType::F64, "block");
  nn::NamedParameters params;
  block.collect("", params);
  // Perturb the norms away from ones so their gradients are not special.
  for (auto& [name, p] : params) {
    if (name.find("norm") != std::string::npos) {
      p.detach().copy_(Tensor::uniform(p.shape(), gen, 0.5, 1.5, DType::F64));
    }
  }
  RopeTable rope = make_rope_table(o.head_dim, 16, 10000.0);
  Tensor x = testing::randn64({2, 5, o.hidden}, gen);
  std::vector<Tensor> inputs{x};
  for (auto& [name, p] : params) inputs.push_back(p);
  // gradcheck re-creates leaves from the inputs; rebuild the block's
  // parameters from them on each call so the check differentiates them.
  auto f = [&](const std::vector<Tensor>& in) {
    nn::DecoderBlock b = block;
    nn::NamedParameters ps;
    size_t i = 1;
    auto rebind = [&](Tensor& t) {
      if (t.defined()) t = in[i++];
    };
    // Same order as collect().
    rebind(b.input_norm.weight);
    rebind(b.input_norm.bias);
    auto& a = b.attention;
    for (nn::Linear* l : {&a.q_proj, &a.k_proj, &a.v_proj, &a.o_proj}) {
      rebind(l->weight);
      rebind(l->bias);
    }
    if (o.qk_norm) {
      rebind(a.q_norm.weight);
      rebind(a.k_norm.weight);
    }
    rebind(b.post_attention_norm.weight);
    rebind(b.post_attention_norm.bias);
    if (o.mlp == nn::MlpKind::SwiGLU) {
      rebind(b.mlp.gate_proj.weight);
      rebind(b.mlp.gate_proj.bias);
    }
    rebind(b.mlp.up_proj.weight);
    rebind(b.mlp.up_proj.bias);
    rebind(b.mlp.down_proj.weight);
    rebind(b.mlp.down_proj.bias);
    EXPECT_EQ(i, in.size());
    return b.forward(in[0], o.use_rope ? &rope : nullptr, output_unread);
  };
  testing::GradcheckOptions opts;
  opts.atol = 1e-6;
  opts.rtol = 1e-5;
  EXPECT_TRUE(testing::gradcheck(f, inputs, opts));
}

TEST(DecoderBlock, LlamaStyleGradients) {
  check_block(small_options());
}

TEST(DecoderBlock, QwenStyleWithBiasAndQkNormGradients) {
  auto o = small_options();
  o.qkv_bias = true;
  o.qk_norm = true;
  check_block(o);
}

TEST(DecoderBlock, Gpt2StyleGradients) {
  check_block(gpt2_options());
}

// The streaming executor's backward use: the same gradients, without the
// last projection's value.
TEST(DecoderBlock, LlamaStyleGradientsWithOutputUnread) {
  check_block(small_options(), true);
}

TEST(DecoderBlock, Gpt2StyleGradientsWithOutputUnread) {
  check_block(gpt2_options(), true);
}

}  // namespace
}  // namespace lt
