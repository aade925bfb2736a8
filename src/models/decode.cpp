#include "models/decode.h"

namespace lt::models {

KvCache::KvCache(const CausalLM& model, int64_t batch, int64_t capacity)
    : batch_(batch), capacity_(capacity) {
  const ModelConfig& c = model.config();
  LT_CHECK(batch > 0 && capacity > 0, "kv cache: batch ", batch, " and capacity ", capacity,
           " must be positive");
  // The stage chain always starts with the embedding; its weight's dtype
  // is the model's.
  const DType dtype =
      static_cast<const EmbedStage&>(*model.stages().front()).tokens().weight.dtype();
  const Shape shape{batch, capacity, c.num_key_value_heads, c.head_dim};
  layers_.reserve(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    // Zeros rather than garbage: a padded prompt row leaves entries that no
    // real token reads, and zeros keep them finite for anyone inspecting.
    layers_.push_back(
        {Tensor::zeros(shape, dtype, model.device()), Tensor::zeros(shape, dtype, model.device())});
  }
}

int64_t KvCache::bytes_for(const ModelConfig& c, DType dtype, int64_t batch, int64_t capacity) {
  return 2 * c.num_hidden_layers * batch * capacity * c.num_key_value_heads * c.head_dim *
         static_cast<int64_t>(dtype_size(dtype));
}

Tensor forward_cached(const CausalLM& model, const Tensor& ids, std::span<const int64_t> starts,
                      std::span<const int64_t> last, KvCache& cache, StageWeightSource* weights) {
  LT_CHECK(ids.dim() == 2, "forward_cached: ids must be [batch, tokens], got ", ids.str());
  const int64_t b = ids.size(0), t = ids.size(1);
  LT_CHECK(b == cache.batch() && static_cast<int64_t>(starts.size()) == b &&
               static_cast<int64_t>(last.size()) == b,
           "forward_cached: ", b, " rows for a cache of ", cache.batch(), " with ", starts.size(),
           " starts and ", last.size(), " last indices");
  const int64_t context = model.config().exact_context();
  for (int64_t r = 0; r < b; ++r) {
    LT_CHECK(starts[r] >= 0 && starts[r] + t <= std::min(cache.capacity(), context),
             "forward_cached: row ", r, " would hold ", starts[r] + t, " positions; the cache has ",
             cache.capacity(), " and the model's context ", context);
    LT_CHECK(last[r] >= 0 && last[r] < t, "forward_cached: last index ", last[r], " of row ", r,
             " is outside its ", t, " tokens");
  }
  const nn::CacheStep step =
      nn::CacheStep::make(std::vector<int64_t>(starts.begin(), starts.end()), t, model.device());
  const StageChain& stages = model.stages();
  const StageContext ctx = model.context(cache.capacity());

  auto hold = [weights](size_t stage) {
    return weights ? weights->hold(stage) : std::unique_ptr<StageWeightSource::Held>();
  };

  const auto& embed = static_cast<const EmbedStage&>(*stages.front());
  Tensor x;
  auto held = hold(0);
  if (step.all_start_at_zero || !embed.positions().weight.defined()) {
    x = embed.forward(ids, ctx);  // the training path: positions 0..T-1 when learned
  } else {
    x = add(embed.tokens().forward(ids), embed.positions().forward(step.positions));
  }
  auto& layers = cache.layers();
  for (size_t i = 1; i + 1 < stages.size(); ++i) {
    const auto& block = static_cast<const BlockStage&>(*stages[i]).block();
    // The stage before lets go first: a tied head holds the embedding's
    // weight again, and must not have it pointed back under it.
    held.reset();
    held = hold(i);
    x = nn::forward_cached(block, x, ctx.rope, step, layers[i - 1]);
  }
  const int64_t c = x.size(2);
  Tensor chosen = x;
  if (t > 1) {
    chosen = Tensor::empty({b, 1, c}, x.dtype(), x.device());
    for (int64_t r = 0; r < b; ++r)
      chosen.select(0, r).copy_(x.select(0, r).slice(0, last[r], last[r] + 1));
  }
  const auto& head = static_cast<const HeadStage&>(*stages.back());
  held.reset();
  held = hold(stages.size() - 1);
  return head.logits(chosen).reshape({b, -1});
}

}  // namespace lt::models
