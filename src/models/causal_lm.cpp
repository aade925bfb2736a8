#include "models/causal_lm.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "models/compiled_blocks.h"

namespace lt::models {

namespace {

nn::BlockOptions block_options(const ModelConfig& c) {
  nn::BlockOptions o;
  o.hidden = c.hidden_size;
  o.intermediate = c.intermediate_size;
  o.num_heads = c.num_attention_heads;
  o.num_kv_heads = c.num_key_value_heads;
  o.head_dim = c.head_dim;
  o.qkv_bias = c.attention_bias;
  o.out_bias = c.attention_out_bias;
  o.mlp_bias = c.mlp_bias;
  o.qk_norm = c.qk_norm;
  o.use_rope = !c.is_gpt2();
  o.norm = c.is_gpt2() ? nn::NormKind::Layer : nn::NormKind::RMS;
  o.mlp = c.hidden_act == Activation::Silu ? nn::MlpKind::SwiGLU : nn::MlpKind::GeluTanh;
  o.norm_eps = c.norm_eps;
  return o;
}

lt::RopeScaling rope_scaling(const ModelConfig& c) {
  lt::RopeScaling s;
  if (c.rope_scaling.type == RopeType::Llama3) {
    s.type = "llama3";
    s.factor = c.rope_scaling.factor;
    s.low_freq_factor = c.rope_scaling.low_freq_factor;
    s.high_freq_factor = c.rope_scaling.high_freq_factor;
    s.original_max_position_embeddings = c.rope_scaling.original_max_position_embeddings;
  }
  return s;
}

// Stage `index` of the model (0: embed, 1..L: the blocks, L + 1: the head),
// its values drawn from `gen` (null: uninitialized) in the order the whole
// model draws them; a tied head holds `tied_weight`.
std::unique_ptr<Stage> build_stage(const ModelConfig& c, size_t index, Generator* gen, DType dtype,
                                   const Tensor& tied_weight) {
  const nn::BlockOptions options = block_options(c);
  const auto layers = static_cast<size_t>(c.num_hidden_layers);
  if (index == 0) {
    nn::Embedding tokens(c.vocab_size, c.hidden_size, gen, dtype, "embed.tokens");
    nn::Embedding positions;
    if (c.is_gpt2()) {
      positions =
          nn::Embedding(c.max_position_embeddings, c.hidden_size, gen, dtype, "embed.positions");
    }
    return std::make_unique<EmbedStage>(std::move(tokens), std::move(positions));
  }
  if (index <= layers) {
    const int block = static_cast<int>(index - 1);
    return std::make_unique<BlockStage>(
        block, nn::DecoderBlock(options, gen, dtype, "block." + std::to_string(block)));
  }
  Tensor lm_head = c.tie_word_embeddings
                       ? tied_weight
                       : nn::normal_parameter({c.vocab_size, c.hidden_size}, options.init_std, gen,
                                              dtype, "head.lm_head.weight");
  return std::make_unique<HeadStage>(
      nn::Norm(options.norm, c.hidden_size, c.norm_eps, dtype, "head.norm"), lm_head,
      c.tie_word_embeddings);
}

// Points every parameter `stage` lists at no memory, which frees it.
void release_memory(const Stage& stage) {
  nn::NamedParameters own;
  stage.collect(own);
  for (const auto& [name, p] : own) {
    p.impl()->storage = nullptr;
    p.impl()->offset = 0;
  }
}

}  // namespace

CausalLM::CausalLM(const ModelConfig& c, Generator* gen, DType dtype,
                   const std::vector<bool>& without_memory, std::map<size_t, Generator>* starts)
    : config_(c) {
  const size_t count = static_cast<size_t>(c.num_hidden_layers) + 2;
  Tensor tied_weight;
  for (size_t s = 0; s < count; ++s) {
    const bool released = s < without_memory.size() && without_memory[s];
    if (released && gen && starts) starts->insert_or_assign(s, *gen);
    stages_.push_back(build_stage(c, s, gen, dtype, tied_weight));
    if (s == 0) tied_weight = static_cast<const EmbedStage&>(*stages_[0]).tokens().weight;
    if (released) release_memory(*stages_.back());
  }
}

CausalLM CausalLM::random(const ModelConfig& config, Generator& gen, DType dtype) {
  return CausalLM(config, &gen, dtype);
}

CausalLM CausalLM::uninitialized(const ModelConfig& config, DType dtype) {
  return CausalLM(config, nullptr, dtype);
}

CausalLM CausalLM::random(const ModelConfig& config, Generator& gen, DType dtype,
                          const std::vector<bool>& without_memory,
                          std::map<size_t, Generator>& starts) {
  return CausalLM(config, &gen, dtype, without_memory, &starts);
}

CausalLM CausalLM::uninitialized(const ModelConfig& config, DType dtype,
                                 const std::vector<bool>& without_memory) {
  return CausalLM(config, nullptr, dtype, without_memory);
}

void CausalLM::fill_random_stage(size_t stage, Generator start) const {
  LT_CHECK(stage < stages_.size(), "fill_random_stage: stage ", stage, " of ", stages_.size());
  nn::NamedParameters own, drawn;
  stages_[stage]->collect(own);
  LT_CHECK(!own.empty(), "fill_random_stage: stage ", stage, " has no parameters");
  const std::unique_ptr<Stage> fresh =
      build_stage(config_, stage, &start, own.front().second.dtype(), Tensor());
  fresh->collect(drawn);
  NoGradGuard no_grad;
  for (size_t i = 0; i < own.size(); ++i) own[i].second.copy_(drawn[i].second);
}

void CausalLM::to(Device device, DType dtype, bool keep_values) {
  for (auto& [name, p] : parameters()) {
    Tensor moved = keep_values ? p.detach().to(device, dtype).contiguous()
                               : Tensor::empty(p.shape(), dtype, device);
    TensorImpl& impl = *p.impl();
    impl.storage = moved.storage();
    impl.offset = moved.offset();
    impl.strides = moved.strides();
    impl.dtype = dtype;
  }
  device_ = device;
  rope_ = RopeTable();
}

void CausalLM::set_compute_device(Device device) {
  device_ = device;
  rope_ = RopeTable();
}

nn::NamedParameters CausalLM::parameters() const {
  nn::NamedParameters out;
  for (const auto& s : stages_) s->collect(out);
  return out;
}

StageContext CausalLM::context(int64_t seq_len, Tensor targets, double loss_denominator) const {
  StageContext ctx;
  if (!config_.is_gpt2()) {
    if (rope_.cos.defined() == false || rope_.cos.size(0) < seq_len) {
      rope_ = make_rope_table(config_.head_dim, rope_table_positions(seq_len), config_.rope_theta,
                              rope_scaling(config_));
      // Uploaded once per growth; the kernels read the f64 table directly.
      rope_.cos = rope_.cos.to(device_);
      rope_.sin = rope_.sin.to(device_);
    }
    ctx.rope = &rope_;
  }
  ctx.targets = std::move(targets);
  ctx.loss_denominator = loss_denominator;
  return ctx;
}

Tensor CausalLM::loss(const Tensor& ids, const Tensor& targets, double loss_denominator) const {
  StageContext ctx = context(ids.size(1), targets, loss_denominator);
  Tensor x = ids;
  for (const auto& s : stages_) x = run_stage(*s, x, ctx);
  return x;
}

Tensor CausalLM::run_stage(const Stage& stage, const Tensor& x, const StageContext& ctx) const {
  return compiled_ ? compiled_->forward(stage, x, ctx) : stage.forward(x, ctx);
}

Tensor CausalLM::logits(const Tensor& ids) const {
  StageContext ctx = context(ids.size(1));
  Tensor x = ids;
  for (size_t i = 0; i + 1 < stages_.size(); ++i) x = run_stage(*stages_[i], x, ctx);
  return static_cast<const HeadStage&>(*stages_.back()).logits(x);
}

int64_t count_targets(const Tensor& targets) {
  Tensor t = targets.to(DType::I64).contiguous();
  const int64_t* p = t.data<int64_t>();
  return std::count_if(p, p + t.numel(), [](int64_t v) { return v != -100; });
}

int64_t rope_table_positions(int64_t seq_len) {
  // A power of two, so that a run with varying lengths rebuilds rarely.
  int64_t n = 256;
  while (n < seq_len) n *= 2;
  return n;
}

Tensor shift_targets(const Tensor& ids) {
  LT_CHECK(ids.dim() == 2, "shift_targets: ids must be [batch, seq], got ", ids.str());
  Tensor src = ids.to(DType::I64).contiguous();
  Tensor out = Tensor::full(ids.shape(), -100, DType::I64);
  const int64_t b = ids.size(0), t = ids.size(1);
  const int64_t* s = src.data<int64_t>();
  int64_t* o = out.data<int64_t>();
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j = 0; j + 1 < t; ++j) o[i * t + j] = s[i * t + j + 1];
  }
  return out;
}

}  // namespace lt::models
