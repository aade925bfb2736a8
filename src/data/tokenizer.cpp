#include "data/tokenizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <deque>
#include <mutex>

#include "core/error.h"
#include "data/unicode.h"
#include "data/word_cache.h"
#include "models/config.h"

namespace lt::data {

// The word cache and its lock. Callers that find the lock taken (another
// thread is encoding) encode without the cache rather than wait: the result
// is the same, only slower.
struct Tokenizer::Cache {
  std::mutex mutex;
  WordCache words;
};

Tokenizer::Tokenizer(BpeModel model, PreTokenizer pre_tokenizer, Normalizer normalizer,
                     Decoder decoder, std::vector<AddedToken> added_tokens)
    : model_(std::move(model)),
      pre_tokenizer_(std::move(pre_tokenizer)),
      normalizer_(std::move(normalizer)),
      decoder_(std::move(decoder)),
      added_tokens_(std::move(added_tokens)),
      cache_(std::make_unique<Cache>()) {
  std::vector<const AddedToken*> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const AddedToken& token : added_tokens_) {
    added_text_.push_back(token.normalized ? normalizer_.apply(token.content) : token.content);
    if (token.content.empty()) continue;
    if (token.normalized) {
      // HF searches the normalized text for the normalized content: with
      // Llama 2's Prepend("▁") that is "▁" + content.
      normalized.push_back(&token);
      normalized_patterns.push_back(added_text_.back());
    } else {
      raw.push_back(&token);
      raw_patterns.push_back(token.content);
    }
  }
  raw_matcher_ = AddedTokenMatcher(std::move(raw), std::move(raw_patterns));
  normalized_matcher_ = AddedTokenMatcher(std::move(normalized), std::move(normalized_patterns));
  build_decoding_table();
}

Tokenizer::Tokenizer(std::unique_ptr<SentencePieceModel> sentencepiece)
    : model_({}, {}, BpeOptions{}, JsonField{}),
      sentencepiece_(std::move(sentencepiece)),
      cache_(std::make_unique<Cache>()) {
  const size_t size = sentencepiece_->size();
  bytes_of_id_.resize(size);
  has_id_.assign(size, true);
  special_id_.resize(size);
  added_index_.assign(size, -1);
  for (uint32_t id = 0; id < size; ++id) {
    bytes_of_id_[id] = sentencepiece_->middle_bytes(id);
    special_id_[id] = sentencepiece_->is_special(id);
  }
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::build_decoding_table() {
  size_t limit = vocab_size();
  bytes_of_id_.assign(limit, std::string());
  has_id_.assign(limit, false);
  special_id_.assign(limit, false);
  added_index_.assign(limit, -1);
  for (uint32_t id = 0; id < model_.id_limit(); ++id) {
    if (const std::string* token = model_.token_string(id)) {
      bytes_of_id_[id] = decoder_.middle_bytes(*token);
      has_id_[id] = true;
    }
  }
  // An added token shadows a vocabulary token with the same id.
  for (size_t i = 0; i < added_tokens_.size(); ++i) {
    const AddedToken& token = added_tokens_[i];
    bytes_of_id_[token.id] = decoder_.middle_bytes(added_text_[i]);
    has_id_[token.id] = true;
    special_id_[token.id] = token.special;
    added_index_[token.id] = static_cast<int32_t>(i);
  }
}

size_t Tokenizer::vocab_size() const {
  if (sentencepiece_) return sentencepiece_->size();
  size_t limit = model_.id_limit();
  for (const AddedToken& token : added_tokens_)
    limit = std::max<size_t>(limit, token.id + size_t{1});
  return limit;
}

size_t Tokenizer::vocab_size_without_added() const {
  if (sentencepiece_) return sentencepiece_->size();
  return model_.id_limit();
}

namespace {

// Note [Added tokens past the embedding]: a tokenizer whose vocabulary fits
// the embedding's rows but whose added tokens pass them is the model's own,
// given tokens after its embedding was sized: Llama 2's first Hugging Face
// uploads had <pad> at 32000 for 32000 rows (transformers issue 24899,
// "LLAMA 2 HF tokenizer len is 32001"). Such a model ran here before this
// check, on every text not holding those tokens (train and eval refuse a
// sample that holds one, generate a prompt), and every id it emits has its
// text; refusing it would stop a model as published from running (or
// convert from converting it), so it is a warning. A vocabulary proper past
// the rows is refused: a model's own never has ids its embedding lacks, so
// the tokenizer is another model's, whose ids train and score the wrong
// rows and which decodes the model's ids into another model's text.
//
// The warning for the added tokens past the rows; "" when none.
std::string added_tokens_past_rows(const Tokenizer& tokenizer, int64_t vocab_size,
                                   const std::string& config_file) {
  std::vector<const AddedToken*> past;
  for (const AddedToken& token : tokenizer.added_tokens())
    if (static_cast<int64_t>(token.id) >= vocab_size) past.push_back(&token);
  if (past.empty()) return "";
  std::sort(past.begin(), past.end(),
            [](const AddedToken* a, const AddedToken* b) { return a->id < b->id; });
  constexpr size_t kNamed = 5;  // the rest counted: added tokens run to hundreds
  std::vector<std::string> named;
  for (size_t i = 0; i < past.size() && i < kNamed; ++i)
    named.push_back(fmt::format("{} (id {})", past[i]->content, past[i]->id));
  std::string names = fmt::format("{}", fmt::join(named, ", "));
  if (past.size() > kNamed) names += fmt::format(" and {} more", past.size() - kNamed);
  const bool one = past.size() == 1;
  return fmt::format(
      "warning: {}: the added token{} {} {} no embedding row: {} has vocab_size {} (ids 0 to {}). "
      "The vocabulary fits, so the tokenizer is taken as the model's; a text holding {} is "
      "refused. Using {} needs the embedding resized (transformers: "
      "model.resize_token_embeddings)",
      tokenizer.file().string(), one ? "" : "s", names, one ? "has" : "have", config_file,
      vocab_size, vocab_size - 1, one ? "this token" : "one of these tokens", one ? "it" : "them");
}

// Note [Special ids no token has]: config.json's eos_token_id and
// bos_token_id are the model's, chosen with its own tokenizer; an id that
// no token of this tokenizer has (Qwen3's eos 151645 beside GPT-2's 50257
// ids) says the tokenizer is another model's, though its vocabulary fits
// the rows. Generation may never stop there (nor transformers', from a
// checkpoint, which pairs this config.json with this tokenizer). It is a
// warning, not a refusal: a new tokenizer on a config trained from
// scratch is deliberate, and the config's ids are the user's to set. An
// id that has a token but is not the tokenizer's own eos is normal (Llama
// 3 instruct configs list several eos ids), so only the token's existence
// is checked. A config.json that cannot be read is left to the model's
// own load, which says what is wrong with it. "" when every id has a token.
std::string special_ids_without_token(const Tokenizer& tokenizer, const std::string& config_file) {
  std::optional<models::ModelConfig> config;
  try {
    config = models::ModelConfig::from_file(config_file);
  } catch (const Error&) {
    return "";
  }
  std::vector<std::string> named, keys;
  bool eos_missing = false;
  auto check = [&](const char* key, const std::vector<int64_t>& ids, bool list) {
    std::vector<int64_t> missing;
    for (int64_t id : ids)
      if (!tokenizer.has_token(id)) missing.push_back(id);
    if (missing.empty()) return;
    keys.push_back(key);
    if (!list) {
      named.push_back(fmt::format("{} {}", key, ids.front()));
    } else {
      named.push_back(fmt::format("{} [{}] (id{} {})", key, fmt::join(ids, ", "),
                                  missing.size() == 1 ? "" : "s", fmt::join(missing, ", ")));
    }
    eos_missing = eos_missing || std::string_view(key) == "eos_token_id";
  };
  check("eos_token_id", config->eos_token_ids, config->eos_token_ids.size() > 1);
  if (config->bos_token_id) check("bos_token_id", {*config->bos_token_id}, false);
  if (named.empty()) return "";
  const size_t size = tokenizer.vocab_size();
  return fmt::format(
      "warning: {}: {} {} no token of {} ({} ids, 0 to {}): the tokenizer is probably another "
      "model's.{} For a new tokenizer on purpose (a model trained from scratch), set {} there "
      "to the tokenizer's own ids",
      config_file, fmt::join(named, " and "), named.size() == 1 ? "names" : "name",
      tokenizer.file().string(), size, size - 1,
      eos_missing ? " Generation may not stop at the end of a sequence, here or in transformers "
                    "(a checkpoint pairs this config.json with this tokenizer)."
                  : "",
      fmt::join(keys, " and "));
}

}  // namespace

std::string check_tokenizer_runs_model(const Tokenizer& tokenizer, int64_t vocab_size,
                                       const std::string& config_file) {
  if (static_cast<int64_t>(tokenizer.vocab_size_without_added()) > vocab_size) {
    const int64_t largest_id = static_cast<int64_t>(tokenizer.vocab_size()) - 1;
    fail(tokenizer.file().string(), ": the tokenizer's largest token id is ", largest_id, ", but ",
         config_file, " has vocab_size ", vocab_size, " (embedding rows for ids 0 to ",
         vocab_size - 1, "): ids ", vocab_size, " to ", largest_id,
         " have no row. Is the tokenizer the model's? A tokenizer given tokens of its own needs "
         "the embedding resized to match (transformers: model.resize_token_embeddings)");
  }
  std::vector<std::string> warnings;
  for (std::string warning : {added_tokens_past_rows(tokenizer, vocab_size, config_file),
                              special_ids_without_token(tokenizer, config_file)})
    if (!warning.empty()) warnings.push_back(std::move(warning));
  return fmt::format("{}", fmt::join(warnings, "\n"));
}

std::optional<uint32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (sentencepiece_) return sentencepiece_->piece_id(token);
  for (const AddedToken& added : added_tokens_) {
    if (added.content == token) return added.id;
  }
  return model_.token_id(token);
}

const std::string& Tokenizer::token_text(uint32_t id) const {
  if (added_index_[id] >= 0) return added_text_[static_cast<size_t>(added_index_[id])];
  return *model_.token_string(id);
}

bool Tokenizer::has_token(int64_t id) const {
  return id >= 0 && static_cast<size_t>(id) < vocab_size() &&
         id_to_token(static_cast<uint32_t>(id)).has_value();
}

std::string Tokenizer::decode_known(std::span<const int32_t> ids) const {
  std::vector<uint32_t> known;
  known.reserve(ids.size());
  for (int32_t id : ids)
    if (has_token(id)) known.push_back(static_cast<uint32_t>(id));
  return decode(known);
}

std::optional<std::string> Tokenizer::id_to_token(uint32_t id) const {
  if (sentencepiece_) return sentencepiece_->piece(id);
  if (id >= has_id_.size() || !has_id_[id]) return std::nullopt;
  return token_text(id);
}

void Tokenizer::encode_normalized(std::string_view text, bool starts_text,
                                  std::vector<uint32_t>& ids, Cache* cache) const {
  // Per-thread scratch, so encoding a segment allocates nothing once warm.
  thread_local std::vector<std::string_view> pieces;
  thread_local std::deque<std::string> arena;
  pieces.clear();
  arena.clear();
  pre_tokenizer_.split(text, starts_text, pieces, arena);
  thread_local std::vector<uint32_t> word_ids;
  for (std::string_view piece : pieces) {
    if (cache != nullptr && cache->words.lookup(piece, ids)) continue;
    word_ids.clear();
    model_.encode_word(piece, word_ids);
    if (cache != nullptr) cache->words.insert(piece, word_ids.data(), word_ids.size());
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
  }
}

void Tokenizer::encode_plain(std::string_view text, bool starts_text, std::vector<uint32_t>& ids,
                             Cache* cache) const {
  std::string normalized_storage;
  std::string_view normalized = text;
  if (normalizer_.apply_if_changed(text, normalized_storage)) normalized = normalized_storage;
  if (normalized_matcher_.empty()) {
    encode_normalized(normalized, starts_text, ids, cache);
    return;
  }
  std::vector<TextSegment> segments;
  normalized_matcher_.split(normalized, segments);
  for (const TextSegment& segment : segments) {
    if (segment.token_id >= 0) {
      ids.push_back(static_cast<uint32_t>(segment.token_id));
    } else {
      encode_normalized(segment.text, starts_text && segment.text.data() == normalized.data(), ids,
                        cache);
    }
  }
}

void Tokenizer::encode(std::string_view text, std::vector<uint32_t>& ids) const {
  if (sentencepiece_) {
    sentencepiece_->encode(text, ids);
    return;
  }
  std::unique_lock<std::mutex> lock(cache_->mutex, std::try_to_lock);
  Cache* cache = lock.owns_lock() ? cache_.get() : nullptr;
  if (raw_matcher_.empty()) {
    encode_plain(text, true, ids, cache);
    return;
  }
  std::vector<TextSegment> segments;
  raw_matcher_.split(text, segments);
  for (const TextSegment& segment : segments) {
    if (segment.token_id >= 0) {
      ids.push_back(static_cast<uint32_t>(segment.token_id));
    } else {
      encode_plain(segment.text, segment.text.data() == text.data(), ids, cache);
    }
  }
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3);
  encode(text, ids);
  return ids;
}

void Tokenizer::check_id(uint32_t id) const {
  if (id >= has_id_.size() || !has_id_[id]) {
    fail("cannot decode token id ", id, ": no token has it (the vocabulary has ", vocab_size(),
         " ids)");
  }
}

std::string Tokenizer::decode_bytes(std::span<const uint32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (uint32_t id : ids) {
    check_id(id);
    if (skip_special_tokens && special_id_[id]) continue;
    bytes += bytes_of_id_[id];
  }
  return bytes;
}

std::string Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special_tokens) const {
  if (sentencepiece_) return sentencepiece_->decode(ids, skip_special_tokens);
  if (decoder_.is_byte_level()) {
    std::string bytes = decode_bytes(ids, skip_special_tokens);
    if (is_valid_utf8(bytes)) return bytes;
    return utf8_lossy(bytes);
  }
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (uint32_t id : ids) {
    check_id(id);
    if (!(skip_special_tokens && special_id_[id])) tokens.push_back(token_text(id));
  }
  return decoder_.decode(std::move(tokens));
}

}  // namespace lt::data
