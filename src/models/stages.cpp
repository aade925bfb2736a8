#include "models/stages.h"

namespace lt::models {

EmbedStage::EmbedStage(nn::Embedding tokens, nn::Embedding positions)
    : Stage("embed"), tokens_(std::move(tokens)), positions_(std::move(positions)) {}

void EmbedStage::collect(nn::NamedParameters& out) const {
  tokens_.collect("embed.tokens", out);
  if (positions_.weight.defined()) positions_.collect("embed.positions", out);
}

Tensor EmbedStage::position_ids(int64_t t, Device device) const {
  // On a GPU every learned position is uploaded once per device and each
  // forward takes a view: a copy to a GPU waits for its stream, so one per
  // forward would wait for all the work queued before it (the previous
  // micro-batch's backward). Only there: a CPU tensor may come from a
  // scoped allocator (CpuAllocatorOverride) that dies before this stage.
  const bool cached = device.is_cuda();
  if (cached && position_ids_.defined() && position_ids_.device() == device) {
    return position_ids_.slice(1, 0, t);
  }
  const int64_t n = cached ? positions_.weight.size(0) : t;
  std::vector<int64_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = i;
  Tensor ids = Tensor::from_vector(pos, {1, n}).to(device);
  if (!cached) return ids;
  position_ids_ = ids;
  return ids.slice(1, 0, t);
}

Tensor EmbedStage::forward(const Tensor& ids, const StageContext&) const {
  LT_CHECK(ids.dim() == 2, "embed: token ids must be [batch, seq], got ", ids.str());
  Tensor x = tokens_.forward(ids);
  if (!positions_.weight.defined()) return x;
  const int64_t t = ids.size(1);
  LT_CHECK(t <= positions_.weight.size(0), "sequence of ", t, " tokens exceeds the model's ",
           positions_.weight.size(0), " learned positions");
  Tensor p = positions_.forward(position_ids(t, ids.device()));
  return add(x, p);
}

BlockStage::BlockStage(int index, nn::DecoderBlock block)
    : Stage("block." + std::to_string(index)), block_(std::move(block)) {}

void BlockStage::collect(nn::NamedParameters& out) const {
  block_.collect(name(), out);
}

Tensor BlockStage::forward(const Tensor& x, const StageContext& ctx) const {
  return block_.forward(x, ctx.rope, ctx.output_unread);
}

HeadStage::HeadStage(nn::Norm final_norm, Tensor lm_head, bool tied)
    : Stage("head"),
      final_norm_(std::move(final_norm)),
      lm_head_(std::move(lm_head)),
      tied_(tied) {}

void HeadStage::collect(nn::NamedParameters& out) const {
  final_norm_.collect("head.norm", out);
  if (!tied_) out.emplace_back("head.lm_head.weight", lm_head_);
}

Tensor HeadStage::forward(const Tensor& hidden, const StageContext& ctx) const {
  LT_CHECK(ctx.targets.defined(), "head: no targets given");
  LT_CHECK(ctx.targets.shape() == Shape({hidden.size(0), hidden.size(1)}), "head: targets ",
           ctx.targets.str(), " do not match hidden ", hidden.str());
  const int64_t rows = hidden.size(0) * hidden.size(1);
  Tensor h = reshape(final_norm_.forward(hidden), {rows, hidden.size(2)});
  ops::OpProfileScope profile("forward lm_head + loss", h.device());
  return lm_head_loss(h, lm_head_, ctx.targets.reshape({rows}), ctx.loss_denominator);
}

Tensor HeadStage::logits(const Tensor& hidden) const {
  return linear(final_norm_.forward(hidden), lm_head_);
}

}  // namespace lt::models
