#pragma once
// Where generation puts a model's weights (Note [Streamed generation] in
// exec/streamed_weights.h): all on the device when they, the KV cache and
// the working memory fit its budget; else the embedding and head stay on
// the device if they fit beside two block slots, as many blocks as fit
// beside them too, and the other blocks stream from host memory through
// the two slots (the ends stream too when even they do not fit). The
// budget is --device-memory-gb when set, else the GPU's free memory.
#include <string>
#include <vector>

#include "exec/streamed_weights.h"
#include "models/causal_lm.h"

namespace lt::train {

// Bytes on the device, in the compute dtype.
struct GenerationFootprint {
  std::vector<exec::StageBytes> stages;  // per stage: embed, blocks, head
  int64_t kv_cache = 0;
  // The largest forward's activations (a prompt batch through one block),
  // the logits and the rope table: an estimate of what the tensors hold at
  // the block's peak, not a count of the kernels' scratch.
  int64_t working = 0;
};

// For `batch` rows of prompts of up to `prompt_tokens` tokens, with room
// for `positions` tokens a row in the cache.
GenerationFootprint generation_footprint(const models::CausalLM& model, DType dtype, int64_t batch,
                                         int64_t prompt_tokens, int64_t positions);

struct GenerationPlacement {
  bool streamed = false;
  exec::StreamLayout layout;   // when streamed
  int64_t device_bytes = 0;    // what the plan puts on the device
  int64_t streamed_bytes = 0;  // copied to the device per forward (each decode step)
  int blocks = 0, streamed_blocks = 0;
  bool ends_streamed = false;  // the embedding and head stream too
};

// `budget` bytes; `budget_source` says where they come from (for errors:
// "--device-memory-gb 4"), `sizing` what the cache was sized for, naming
// the options that shrink it. A budget too small for the KV cache, the
// working memory and two slots is an lt::Error naming all three.
GenerationPlacement place_generation(const GenerationFootprint& footprint, int64_t budget,
                                     const std::string& budget_source, const std::string& sizing);

}  // namespace lt::train
