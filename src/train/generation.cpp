#include "train/generation.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "autograd/grad_mode.h"
#include "core/json_brief.h"
#include "core/regular_file.h"
#include "data/unicode.h"
#include "models/decode.h"
#ifdef LT_WITH_CUDA
#include "nn/cuda/argmax.h"
#endif

namespace lt::train {

namespace {

// splitmix64's finalizer: distinct, well-mixed seeds for rows 0, 1, 2, ...
uint64_t row_seed(uint64_t seed, int64_t row) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(row) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// What one row carries through its batch.
struct RowState {
  int64_t index = 0;  // into the prompts
  int64_t prompt_len = 0;
  bool done = false;
  Generator gen;
  std::string bytes;  // the new tokens' bytes, when stop strings are watched
  size_t cut = std::string::npos;
  Generation out;
};

bool is_eos(int32_t token, const std::vector<int32_t>& eos_ids) {
  return std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end();
}

// Appends `token` to the row and decides whether the row is done.
void take_token(RowState& row, int32_t token, const GenerationOptions& o, int64_t context) {
  row.out.tokens.push_back(token);
  const auto made = static_cast<int64_t>(row.out.tokens.size());
  if (is_eos(token, o.eos_ids)) {
    row.out.finish = FinishReason::kEos;
    row.done = true;
    return;
  }
  if (!o.stop_strings.empty()) {
    const size_t old_size = row.bytes.size();
    const auto id = static_cast<uint32_t>(token);
    if (o.tokenizer->has_token(token)) row.bytes += o.tokenizer->decode_bytes({&id, 1});
    for (const std::string& stop : o.stop_strings) {
      // Only where the new bytes could complete it.
      const size_t from = old_size >= stop.size() ? old_size - stop.size() + 1 : 0;
      const size_t at = row.bytes.find(stop, from);
      if (at != std::string::npos && at < row.cut) row.cut = at;
    }
    if (row.cut != std::string::npos) {
      row.out.finish = FinishReason::kStop;
      row.done = true;
      return;
    }
  }
  if (made >= o.max_new_tokens) {
    row.out.finish = FinishReason::kLength;
    row.done = true;
  } else if (row.prompt_len + made > context) {
    // The token made from position context - 1's logits is the last: it
    // would sit at position `context` to be read. (It stopped one before,
    // where transformers goes on.)
    row.out.finish = FinishReason::kContext;
    row.done = true;
  }
}

void finish_text(RowState& row, const GenerationOptions& o) {
  if (o.tokenizer == nullptr) return;
  if (row.out.finish == FinishReason::kStop) {
    row.out.text = data::utf8_lossy(std::string_view(row.bytes).substr(0, row.cut));
    return;
  }
  const size_t count = row.out.tokens.size() - (row.out.finish == FinishReason::kEos ? 1 : 0);
  row.out.text = o.tokenizer->decode_known(std::span(row.out.tokens).first(count));
}

// Logits [B, V] on any device -> f32 rows on the host.
Tensor host_logits(const Tensor& logits) {
  return logits.to(Device::cpu()).to(DType::F32).contiguous();
}

void run_batch(const models::CausalLM& model, const std::vector<std::vector<int32_t>>& prompts,
               std::vector<RowState>& rows, const GenerationOptions& o,
               const TokenCallback& on_token) {
  const auto b = static_cast<int64_t>(rows.size());
  const int64_t context = model.config().exact_context();
  int64_t longest = 0;
  for (const RowState& r : rows) longest = std::max(longest, r.prompt_len);
  // (--max-new-tokens may be near INT64_MAX: the sum must not wrap.)
  const int64_t capacity = std::min(context, longest + std::min(o.max_new_tokens, context));
  models::KvCache cache(model, b, capacity);

  // The prompts, right-padded (nn/kv_cache.h says why padding is safe).
  std::vector<int64_t> ids(static_cast<size_t>(b * longest), 0);
  std::vector<int64_t> starts(static_cast<size_t>(b), 0), last(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r) {
    const auto& p = prompts[rows[r].index];
    std::copy(p.begin(), p.end(), ids.begin() + r * longest);
    last[r] = rows[r].prompt_len - 1;
  }
  Tensor logits =
      models::forward_cached(model, Tensor::from_vector(ids, {b, longest}).to(model.device()),
                             starts, last, cache, o.streamed);
  const int64_t vocab = logits.size(1);
  std::vector<int64_t> next(static_cast<size_t>(b));
  std::fill(last.begin(), last.end(), 0);
  while (true) {
    // Greedy on a GPU: the argmax there, one id per row back (not a row of
    // logits the size of the vocabulary).
    Tensor host, chosen;
#ifdef LT_WITH_CUDA
    if (o.sampling.temperature == 0 && logits.device().is_cuda())
      chosen = nn::cuda::argmax_rows(logits).to(Device::cpu());
#endif
    if (!chosen.defined()) host = host_logits(logits);
    bool any_live = false;
    for (int64_t r = 0; r < b; ++r) {
      RowState& row = rows[r];
      if (row.done) {
        // A finished row still runs (the batch moves together): its token
        // and position are placeholders whose results are never read.
        next[r] = 0;
        starts[r] = 0;
        continue;
      }
      const int32_t token =
          chosen.defined()
              ? chosen.data<int32_t>()[r]
              : sample_token({host.data<float>() + r * vocab, static_cast<size_t>(vocab)},
                             o.sampling, row.gen);
      take_token(row, token, o, context);
      if (on_token) on_token(row.index, token);
      // The token just made sits at prompt_len + made - 1; a row it ended
      // takes a placeholder from now on (a row ended by the context would
      // sit past it, and the batch's next step, for the rows still going,
      // was refused).
      next[r] = row.done ? 0 : token;
      starts[r] = row.done ? 0 : row.prompt_len + static_cast<int64_t>(row.out.tokens.size()) - 1;
      any_live = any_live || !row.done;
    }
    if (!any_live) break;
    logits = models::forward_cached(model, Tensor::from_vector(next, {b, 1}).to(model.device()),
                                    starts, last, cache, o.streamed);
  }
  for (RowState& row : rows) finish_text(row, o);
}

}  // namespace

void RowsInOrder::done(int64_t index) {
  done_.at(static_cast<size_t>(index)) = true;
  while (!flushed_ && next_ < done_.size() && done_[next_]) emit_(static_cast<int64_t>(next_++));
}

int64_t RowsInOrder::flush_done() {
  if (flushed_) return 0;
  flushed_ = true;
  int64_t handed = 0;
  for (size_t i = next_; i < done_.size(); ++i) {
    if (!done_[i]) continue;
    emit_(static_cast<int64_t>(i));
    ++handed;
  }
  return handed;
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kContext:
      return "context";
  }
  return "?";
}

std::vector<Generation> generate(const models::CausalLM& model,
                                 const std::vector<std::vector<int32_t>>& prompts,
                                 const GenerationOptions& o, const TokenCallback& on_token) {
  check_sampling_options(o.sampling);
  LT_CHECK(o.max_new_tokens >= 0, "--max-new-tokens must be 0 or more, got ", o.max_new_tokens);
  LT_CHECK(o.batch_size >= 1, "--batch-size must be at least 1, got ", o.batch_size);
  LT_CHECK(o.stop_strings.empty() || o.tokenizer != nullptr,
           "--stop needs a tokenizer to read the text");
  check_stop_strings(o.stop_strings);
  const int64_t context = model.config().exact_context();
  const int64_t vocab = model.config().vocab_size;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto len = static_cast<int64_t>(prompts[i].size());
    LT_CHECK(len > 0, "prompt ", i + 1, " is empty: generation needs at least one token");
    // A prompt of the whole context still makes one token, from its last
    // position's logits (as transformers does); no position holds it.
    LT_CHECK(len <= context, "prompt ", i + 1, " has ", len,
             " tokens, more than the model's context of ", context, " (",
             model.config().exact_context_key(), "); shorten the prompt");
    for (int32_t id : prompts[i]) {
      LT_CHECK(id >= 0 && id < vocab, "prompt ", i + 1, ": token id ", id,
               " is outside the model's vocabulary [0, ", vocab, ")");
    }
  }
  std::vector<Generation> results(prompts.size());
  if (prompts.empty()) return results;
  if (o.max_new_tokens == 0) {  // kLength, nothing made
    for (size_t i = 0; o.on_row_done && i < results.size(); ++i)
      o.on_row_done(static_cast<int64_t>(i), results[i]);
    return results;
  }

  NoGradGuard no_grad;
  // Streamed: the cache and activations in the device's memory, the
  // kernels on its compute stream, where they order with the weights' copies.
  std::unique_ptr<exec::StreamingDevice::Scope> on_device;
  if (o.streamed) on_device = o.streamed->compute_scope();
  // Longest prompts first within each window, so each batch pads little;
  // ties keep input order.
  std::vector<int64_t> order(prompts.size());
  std::iota(order.begin(), order.end(), 0);
  // (A --batch-size near INT64_MAX must not wrap the window to 0.)
  const size_t window = o.batch_size > static_cast<int64_t>(prompts.size()) / kWindowBatches
                            ? prompts.size()
                            : static_cast<size_t>(o.batch_size * kWindowBatches);
  for (size_t first = 0; first < order.size(); first += window) {
    std::stable_sort(
        order.begin() + static_cast<std::ptrdiff_t>(first),
        order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), first + window)),
        [&](int64_t a, int64_t c) { return prompts[a].size() > prompts[c].size(); });
  }
  for (size_t first = 0; first < order.size(); first += static_cast<size_t>(o.batch_size)) {
    const size_t end = std::min(order.size(), first + static_cast<size_t>(o.batch_size));
    std::vector<RowState> rows;
    for (size_t i = first; i < end; ++i) {
      RowState row;
      row.index = order[i];
      row.prompt_len = static_cast<int64_t>(prompts[row.index].size());
      row.gen = Generator(row_seed(o.seed, row.index));
      rows.push_back(std::move(row));
    }
    run_batch(model, prompts, rows, o, on_token);
    for (RowState& row : rows) {
      results[row.index] = std::move(row.out);
      if (o.on_row_done) o.on_row_done(row.index, results[row.index]);
    }
    if (o.on_batch_done)
      o.on_batch_done(static_cast<int64_t>(end), static_cast<int64_t>(order.size()));
  }
  return results;
}

std::vector<int32_t> eos_ids_for(const std::string& model_dir, const models::ModelConfig& config) {
  const std::filesystem::path file = std::filesystem::path(model_dir) / "generation_config.json";
  std::vector<int32_t> ids;
  if (std::filesystem::exists(file)) {
    require_regular_file(file);
    std::ifstream in(file);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::parse_error& e) {
      fail(file.string(), ": not valid JSON (", e.what(), ")");  // its line and column
    }
    LT_CHECK(j.is_object(), file.string(), ": not a JSON object (found ", j.type_name(), ")");
    auto it = j.find("eos_token_id");
    if (it != j.end() && !it->is_null()) {
      const nlohmann::json list = it->is_array() ? *it : nlohmann::json::array({*it});
      for (const auto& v : list) {
        LT_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, file.string(),
                 ": field \"eos_token_id\": expected a token id or a list of them, found ",
                 brief_json(*it));
        ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
      }
      return ids;
    }
  }
  for (int64_t id : config.eos_token_ids) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

}  // namespace lt::train
