#pragma once
// Greedy decoding without a KV cache: each new token runs the whole prefix.
// Enough for the demo's short sample, and the recomputing reference the KV
// cache is tested against; generation proper (batched, cached, sampled) is
// train/generation.h. Runs where the model is (CPU or GPU, in its dtype);
// ties go to the lowest id.
#include <vector>

#include "models/causal_lm.h"

namespace lt::train {

std::vector<int32_t> greedy_generate(const models::CausalLM& model,
                                     const std::vector<int32_t>& prompt, int64_t max_new_tokens,
                                     int32_t stop_id = -1);

}  // namespace lt::train
