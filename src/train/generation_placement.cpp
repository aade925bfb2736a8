#include "train/generation_placement.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/bytes_text.h"
#include "core/error.h"
#include "models/decode.h"

namespace lt::train {

GenerationFootprint generation_footprint(const models::CausalLM& model, DType dtype, int64_t batch,
                                         int64_t prompt_tokens, int64_t positions) {
  const models::ModelConfig& c = model.config();
  GenerationFootprint f;
  f.stages = exec::stage_bytes(model, dtype);
  f.kv_cache = models::KvCache::bytes_for(c, dtype, batch, positions);
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  // What a block's cached forward holds at its MLP (nn/kv_cache.cpp): its
  // input, both norms' outputs, the residual and the output; q and the
  // attention's output, k and v; gate, up and their two products.
  const int64_t per_token = 5 * c.hidden_size + 2 * q + 2 * kv + 4 * c.intermediate_size;
  const auto size = static_cast<int64_t>(dtype_size(dtype));
  // The rope table: f64 cos and sin for a power of two of positions, at
  // least 256 (CausalLM::context).
  int64_t rope_positions = 256;
  while (rope_positions < positions) rope_positions *= 2;
  f.working = batch * prompt_tokens * per_token * size +
              batch * c.vocab_size * (size + 4) +  // the logits, and their f32 copy
              rope_positions * c.head_dim * 8;
  return f;
}

GenerationPlacement place_generation(const GenerationFootprint& f, int64_t budget,
                                     const std::string& budget_source, const std::string& sizing) {
  const auto stages = static_cast<int>(f.stages.size());
  LT_CHECK(stages >= 3, "generation placement: a model of ", stages, " stages");
  GenerationPlacement p;
  p.blocks = stages - 2;
  const exec::StageBytes& embed = f.stages.front();
  const exec::StageBytes& head = f.stages.back();
  int64_t block = 0, blocks = 0;
  for (int s = 1; s + 1 < stages; ++s) {
    block = std::max(block, f.stages[s].own);
    blocks += f.stages[s].own;
  }
  const int64_t ends = embed.own + head.own;
  const int64_t fixed = f.kv_cache + f.working;
  if (ends + blocks + fixed <= budget) {
    p.device_bytes = ends + blocks + fixed;
    return p;
  }
  const std::string fixed_text =
      fmt::format("the KV cache for {} takes {} and the working memory {}", sizing,
                  bytes_text(f.kv_cache), bytes_text(f.working));
  LT_CHECK(fixed < budget, budget_source, " (", bytes_text(budget), ") is too small: ", fixed_text,
           " before any weights; lower --batch-size or --max-new-tokens (or shorten the "
           "prompts), or raise --device-memory-gb");
  // The ends on the device when they fit beside two block slots; else they
  // stream too, and a slot must hold the largest stage that streams.
  int64_t slot = block;
  int64_t room = budget - fixed - ends;
  p.ends_streamed = room < 2 * slot;
  if (p.ends_streamed) {
    slot = std::max({block, embed.reads, head.reads});
    room = budget - fixed;
  }
  LT_CHECK(room >= 2 * slot, budget_source, " (", bytes_text(budget),
           ") is too small to stream the model: ", fixed_text,
           ", and streaming needs two weight slots of ", bytes_text(slot), " (",
           bytes_text(fixed + 2 * slot),
           " in all); raise --device-memory-gb, or lower --batch-size or --max-new-tokens");
  // As many blocks as fit beside the slots stay; the first ones, so that
  // the copy of the first streamed block for the next step overlaps them.
  const int resident = block == 0 ? p.blocks
                                  : static_cast<int>(std::min<int64_t>((room - 2 * slot) / block,
                                                                       std::max(0, p.blocks - 2)));
  p.streamed = true;
  p.layout.slots = 2;
  p.layout.streamed.assign(static_cast<size_t>(stages), false);
  p.layout.streamed.front() = p.layout.streamed.back() = p.ends_streamed;
  for (int b = resident; b < p.blocks; ++b) {
    p.layout.streamed[static_cast<size_t>(b + 1)] = true;
    p.streamed_bytes += f.stages[static_cast<size_t>(b + 1)].reads;
  }
  if (p.ends_streamed) p.streamed_bytes += embed.reads + head.reads;
  p.streamed_blocks = p.blocks - resident;
  p.device_bytes =
      fixed + 2 * slot + static_cast<int64_t>(resident) * block + (p.ends_streamed ? 0 : ends);
  return p;
}

}  // namespace lt::train
