#pragma once
// Batched text generation with a KV cache (models/decode.h), on the device
// the model is on (the CPU in f32, a GPU in its dtype).
//
// Prompts run in batches of `batch_size` rows, longest prompts together
// (to pad little) within windows of kWindowBatches batches taken in prompt
// order, so that rows finish window by window and a caller can write them
// in prompt order as they come (on_row_done, RowsInOrder) instead of all
// at the end; results come back in prompt order. Each batch runs its
// padded prompts once, then one token per row per step until every row is
// done. A row is done at the first of:
//   - an EOS id (`eos_ids`): the EOS is the last of its tokens;
//   - a stop string in its text: the token that completed it is the last
//     of its tokens, and its text is cut before the stop string;
//   - max_new_tokens tokens;
//   - the model's context: the new token would sit past it (a prompt of
//     the whole context makes one token, as transformers does).
// generate() refuses a prompt longer than the context, naming its row.
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

struct Generation;

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
  // Called after each batch, before on_batch_done, for each of its rows:
  // the prompt's index and what the row made.
  std::function<void(int64_t index, const Generation&)> on_row_done;
};

// Batches a window of prompts spans (the header says why windows).
constexpr int64_t kWindowBatches = 16;

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

// Hands indices 0, 1, 2, ... to `emit` in order, each once it and every
// index before it are done(): rows written in prompt order as they finish.
class RowsInOrder {
 public:
  RowsInOrder(size_t count, std::function<void(int64_t index)> emit)
      : done_(count, false), emit_(std::move(emit)) {}
  void done(int64_t index);
  // Indices handed to `emit` in order so far: the first not done.
  int64_t emitted() const { return static_cast<int64_t>(next_); }
  // After a stop: hands the done indices past the first not done to
  // `emit`, in order, and returns how many.
  int64_t flush_done();

 private:
  std::vector<bool> done_;
  size_t next_ = 0;
  bool flushed_ = false;
  std::function<void(int64_t)> emit_;
};

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
