#include "models/hf_mapping.h"

namespace lt::models {

namespace {

std::vector<HfRule> llama_like_rules(const ModelConfig& c) {
  std::vector<HfRule> rules;
  rules.push_back({"model.embed_tokens.weight", {"embed.tokens.weight"}});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string hf = "model.layers." + std::to_string(i) + ".";
    const std::string in = "block." + std::to_string(i) + ".";
    rules.push_back({hf + "input_layernorm.weight", {in + "input_norm.weight"}});
    for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
      rules.push_back({hf + "self_attn." + p + ".weight", {in + "attention." + p + ".weight"}});
      if (c.attention_bias) {
        rules.push_back({hf + "self_attn." + p + ".bias", {in + "attention." + p + ".bias"}});
      }
    }
    rules.push_back({hf + "self_attn.o_proj.weight", {in + "attention.o_proj.weight"}});
    if (c.attention_out_bias) {
      rules.push_back({hf + "self_attn.o_proj.bias", {in + "attention.o_proj.bias"}});
    }
    if (c.qk_norm) {
      rules.push_back({hf + "self_attn.q_norm.weight", {in + "attention.q_norm.weight"}});
      rules.push_back({hf + "self_attn.k_norm.weight", {in + "attention.k_norm.weight"}});
    }
    rules.push_back({hf + "post_attention_layernorm.weight", {in + "post_attention_norm.weight"}});
    for (const char* p : {"gate_proj", "up_proj", "down_proj"}) {
      rules.push_back({hf + "mlp." + p + ".weight", {in + "mlp." + p + ".weight"}});
      if (c.mlp_bias) rules.push_back({hf + "mlp." + p + ".bias", {in + "mlp." + p + ".bias"}});
    }
  }
  rules.push_back({"model.norm.weight", {"head.norm.weight"}});
  if (!c.tie_word_embeddings) rules.push_back({"lm_head.weight", {"head.lm_head.weight"}});
  return rules;
}

std::vector<HfRule> gpt2_rules(const ModelConfig& c) {
  std::vector<HfRule> rules;
  rules.push_back({"transformer.wte.weight", {"embed.tokens.weight"}});
  rules.push_back({"transformer.wpe.weight", {"embed.positions.weight"}});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string hf = "transformer.h." + std::to_string(i) + ".";
    const std::string in = "block." + std::to_string(i) + ".";
    const std::string at = in + "attention.";
    rules.push_back({hf + "ln_1.weight", {in + "input_norm.weight"}});
    rules.push_back({hf + "ln_1.bias", {in + "input_norm.bias"}});
    rules.push_back({hf + "attn.c_attn.weight",
                     {at + "q_proj.weight", at + "k_proj.weight", at + "v_proj.weight"},
                     HfLayout::FusedQkvConv1D});
    rules.push_back({hf + "attn.c_attn.bias",
                     {at + "q_proj.bias", at + "k_proj.bias", at + "v_proj.bias"},
                     HfLayout::FusedQkvBias});
    rules.push_back({hf + "attn.c_proj.weight", {at + "o_proj.weight"}, HfLayout::Transposed});
    rules.push_back({hf + "attn.c_proj.bias", {at + "o_proj.bias"}});
    rules.push_back({hf + "ln_2.weight", {in + "post_attention_norm.weight"}});
    rules.push_back({hf + "ln_2.bias", {in + "post_attention_norm.bias"}});
    rules.push_back({hf + "mlp.c_fc.weight", {in + "mlp.up_proj.weight"}, HfLayout::Transposed});
    rules.push_back({hf + "mlp.c_fc.bias", {in + "mlp.up_proj.bias"}});
    rules.push_back(
        {hf + "mlp.c_proj.weight", {in + "mlp.down_proj.weight"}, HfLayout::Transposed});
    rules.push_back({hf + "mlp.c_proj.bias", {in + "mlp.down_proj.bias"}});
  }
  rules.push_back({"transformer.ln_f.weight", {"head.norm.weight"}});
  rules.push_back({"transformer.ln_f.bias", {"head.norm.bias"}});
  if (!c.tie_word_embeddings) rules.push_back({"lm_head.weight", {"head.lm_head.weight"}});
  return rules;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<HfRule> hf_rules(const ModelConfig& config) {
  return config.is_gpt2() ? gpt2_rules(config) : llama_like_rules(config);
}

Tensor hf_tensor(const HfRule& rule, const std::function<Tensor(const std::string&)>& get,
                 DType dtype) {
  switch (rule.layout) {
    case HfLayout::Same:
      return get(rule.internal[0]).to(dtype).contiguous();
    case HfLayout::Transposed:
      return get(rule.internal[0]).transpose(0, 1).contiguous().to(dtype);
    case HfLayout::FusedQkvConv1D:
    case HfLayout::FusedQkvBias: {
      const bool weight = rule.layout == HfLayout::FusedQkvConv1D;
      const Tensor q = get(rule.internal[0]);
      const int64_t part = q.size(0);
      Tensor t =
          weight ? Tensor::empty({q.size(1), 3 * part}, dtype) : Tensor::empty({3 * part}, dtype);
      for (int k = 0; k < 3; ++k) {
        const Tensor p = get(rule.internal[k]);
        t.slice(weight ? 1 : 0, k * part, (k + 1) * part).copy_(weight ? p.transpose(0, 1) : p);
      }
      return t;
    }
  }
  fail("unknown Hugging Face layout for '", rule.hf_name, "'");
}

Shape hf_shape(const HfRule& rule, const std::function<Shape(const std::string&)>& shape_of) {
  const Shape s = shape_of(rule.internal[0]);
  switch (rule.layout) {
    case HfLayout::Same:
      return s;
    case HfLayout::Transposed:
      return {s[1], s[0]};
    case HfLayout::FusedQkvConv1D:
      return {s[1], 3 * s[0]};
    case HfLayout::FusedQkvBias:
      return {3 * s[0]};
  }
  fail("unknown Hugging Face layout for '", rule.hf_name, "'");
}

nn::NamedParameters to_hf_layout(const ModelConfig& config,
                                 const std::map<std::string, Tensor>& by_name, DType dtype) {
  auto get = [&](const std::string& name) -> Tensor {
    auto it = by_name.find(name);
    LT_CHECK(it != by_name.end() && it->second.defined(), "no tensor for parameter '", name, "'");
    return it->second.detach();
  };
  nn::NamedParameters out;
  for (const HfRule& rule : hf_rules(config))
    out.emplace_back(rule.hf_name, hf_tensor(rule, get, dtype));
  return out;
}

bool is_ignorable_hf_buffer(const std::string& name) {
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias") ||
         ends_with(name, "rotary_emb.inv_freq");
}

}  // namespace lt::models
