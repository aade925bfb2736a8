#pragma once
// Batched text generation with a KV cache (models/decode.h), on the device
// the model is on (the CPU in f32, a GPU in its dtype).
//
// Prompts run in batches of `batch_size` rows (longest prompts together,
// to pad little); results come back in prompt order. Each batch runs its
// padded prompts once, then one token per row per step until every row is
// done. A row is done at the first of:
//   - an EOS id (`eos_ids`): the EOS is the last of its tokens;
//   - a stop string in its text: the token that completed it is the last
//     of its tokens, and its text is cut before the stop string;
//   - max_new_tokens tokens;
//   - the model's context: prompt + new tokens = max_position_embeddings.
// A prompt must leave room for one new token (fewer tokens than the
// context); generate() refuses a longer one, naming its row.
//
// Sampling (generation_sampling.h) draws from a generator per row, seeded
// from `seed` and the row's index, so the outputs do not depend on the
// batch size or the other rows.
#include <functional>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "exec/streamed_weights.h"
#include "models/causal_lm.h"
#include "train/generation_sampling.h"

namespace lt::train {

struct GenerationOptions {
  int64_t max_new_tokens = 256;
  SamplingOptions sampling;
  uint64_t seed = 0;
  int64_t batch_size = 8;
  std::vector<int32_t> eos_ids;
  std::vector<std::string> stop_strings;       // need `tokenizer`
  const data::Tokenizer* tokenizer = nullptr;  // for `text` and stop strings; may be null
  // The model's blocks stream from host memory through these (Note
  // [Streamed generation], exec/streamed_weights.h); null: the model is all
  // on its device.
  exec::StreamedWeights* streamed = nullptr;
  // Called after each batch with the rows done so far and the total.
  std::function<void(int64_t done, int64_t total)> on_batch_done;
};

enum class FinishReason { kEos, kStop, kLength, kContext };
const char* finish_reason_name(FinishReason reason);  // "eos", "stop", "length", "context"

struct Generation {
  std::vector<int32_t> tokens;  // the new tokens only
  FinishReason finish = FinishReason::kLength;
  // With a tokenizer: the new tokens' text, without a final EOS and cut
  // before a stop string; invalid UTF-8 replaced by U+FFFD. Ids the
  // tokenizer has no token for (a vocabulary padded past it) add nothing.
  std::string text;
};

// Called for each new token as it is made: the prompt's index and the
// token (streaming output). Tokens of one row arrive in order.
using TokenCallback = std::function<void(int64_t row, int32_t token)>;

// Checks the options (naming the CLI flags) and every prompt's length.
std::vector<Generation> generate(const models::CausalLM& model,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& options,
                                 const TokenCallback& on_token = {});

// The EOS ids of a model folder: generation_config.json's eos_token_id
// (an id or a list), else config.json's (ModelConfig::eos_token_ids).
// A malformed generation_config.json is an lt::Error naming it.
std::vector<int32_t> eos_ids_for(const std::string& model_dir, const models::ModelConfig& config);

}  // namespace lt::train
