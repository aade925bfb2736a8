#pragma once
// The three kinds of stage every family is built from.
#include "models/stage.h"
#include "nn/block.h"

namespace lt::models {

// Token embedding, plus learned absolute positions for GPT-2.
class EmbedStage final : public Stage {
 public:
  EmbedStage(nn::Embedding tokens, nn::Embedding positions);
  StageKind kind() const override { return StageKind::Embed; }
  void collect(nn::NamedParameters& out) const override;
  Tensor forward(const Tensor& ids, const StageContext& ctx) const override;
  const nn::Embedding& tokens() const { return tokens_; }
  // GPT-2's learned positions; weight undefined for RoPE families.
  const nn::Embedding& positions() const { return positions_; }

 private:
  // [1, t] i64: 0, 1, ..., t - 1 on `device`.
  Tensor position_ids(int64_t t, Device device) const;

  nn::Embedding tokens_;
  nn::Embedding positions_;  // weight undefined when the family uses RoPE
  // On a GPU: [1, learned positions] on the device of the last forward.
  mutable Tensor position_ids_;
};

class BlockStage final : public Stage {
 public:
  BlockStage(int index, nn::DecoderBlock block);
  StageKind kind() const override { return StageKind::Block; }
  void collect(nn::NamedParameters& out) const override;
  Tensor forward(const Tensor& x, const StageContext& ctx) const override;
  const nn::DecoderBlock& block() const { return block_; }

 private:
  nn::DecoderBlock block_;
};

// Final norm, the lm_head projection and the loss. With tied embeddings
// the projection is the embed stage's weight, held here but not listed.
class HeadStage final : public Stage {
 public:
  HeadStage(nn::Norm final_norm, Tensor lm_head, bool tied);
  StageKind kind() const override { return StageKind::Head; }
  void collect(nn::NamedParameters& out) const override;
  Tensor forward(const Tensor& hidden, const StageContext& ctx) const override;
  // Logits for every position, [B, T, V] (evaluation and generation only).
  Tensor logits(const Tensor& hidden) const;
  bool tied() const { return tied_; }

 private:
  nn::Norm final_norm_;
  Tensor lm_head_;  // [V, C]
  bool tied_;
};

}  // namespace lt::models
