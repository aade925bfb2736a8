#include "data/tokenizer.h"

#include <deque>
#include <mutex>

#include "core/error.h"
#include "data/byte_level.h"
#include "data/unicode.h"
#include "data/word_cache.h"

namespace lt::data {

// The word cache and its lock. Callers that find the lock taken (another
// thread is encoding) encode without the cache rather than wait: the result
// is the same, only slower.
struct Tokenizer::Cache {
  std::mutex mutex;
  WordCache words;
};

Tokenizer::Tokenizer(BpeModel model, PreTokenizer pre_tokenizer, Normalizer normalizer,
                     std::vector<AddedToken> added_tokens)
    : model_(std::move(model)),
      pre_tokenizer_(std::move(pre_tokenizer)),
      normalizer_(normalizer),
      added_tokens_(std::move(added_tokens)),
      cache_(std::make_unique<Cache>()) {
  std::vector<const AddedToken*> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const AddedToken& token : added_tokens_) {
    if (token.content.empty()) continue;
    if (token.normalized) {
      normalized.push_back(&token);
      normalized_patterns.push_back(normalizer_ == Normalizer::kNfc ? nfc(token.content)
                                                                    : token.content);
    } else {
      raw.push_back(&token);
      raw_patterns.push_back(token.content);
    }
  }
  raw_matcher_ = AddedTokenMatcher(std::move(raw), std::move(raw_patterns));
  normalized_matcher_ = AddedTokenMatcher(std::move(normalized), std::move(normalized_patterns));
  build_decoding_table();
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::build_decoding_table() {
  size_t limit = vocab_size();
  bytes_of_id_.assign(limit, std::string());
  has_id_.assign(limit, false);
  special_id_.assign(limit, false);
  // HF's ByteLevel decoder maps a token's characters back to bytes, or keeps
  // the token's own UTF-8 when a character is outside the byte alphabet.
  auto decoded = [](const std::string& token) {
    std::optional<std::string> bytes = byte_level_decode(token);
    return bytes ? *bytes : token;
  };
  for (uint32_t id = 0; id < model_.id_limit(); ++id) {
    if (const std::string* token = model_.token_string(id)) {
      bytes_of_id_[id] = decoded(*token);
      has_id_[id] = true;
    }
  }
  // An added token shadows a vocabulary token with the same id.
  for (const AddedToken& token : added_tokens_) {
    bytes_of_id_[token.id] = decoded(token.content);
    has_id_[token.id] = true;
    special_id_[token.id] = token.special;
  }
}

size_t Tokenizer::vocab_size() const {
  size_t limit = model_.id_limit();
  for (const AddedToken& token : added_tokens_)
    limit = std::max<size_t>(limit, token.id + size_t{1});
  return limit;
}

std::optional<uint32_t> Tokenizer::token_to_id(std::string_view token) const {
  for (const AddedToken& added : added_tokens_) {
    if (added.content == token) return added.id;
  }
  return model_.token_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(uint32_t id) const {
  for (const AddedToken& added : added_tokens_) {
    if (added.id == id) return added.content;
  }
  if (const std::string* token = model_.token_string(id)) return *token;
  return std::nullopt;
}

void Tokenizer::encode_normalized(std::string_view text, std::vector<uint32_t>& ids,
                                  Cache* cache) const {
  // Per-thread scratch, so encoding a segment allocates nothing once warm.
  thread_local std::vector<std::string_view> pieces;
  thread_local std::deque<std::string> arena;
  pieces.clear();
  arena.clear();
  pre_tokenizer_.split(text, pieces, arena);
  thread_local std::vector<uint32_t> word_ids;
  for (std::string_view piece : pieces) {
    if (cache != nullptr && cache->words.lookup(piece, ids)) continue;
    word_ids.clear();
    model_.encode_word(piece, word_ids);
    if (cache != nullptr) cache->words.insert(piece, word_ids.data(), word_ids.size());
    ids.insert(ids.end(), word_ids.begin(), word_ids.end());
  }
}

void Tokenizer::encode_plain(std::string_view text, std::vector<uint32_t>& ids,
                             Cache* cache) const {
  std::string normalized_storage;
  std::string_view normalized = text;
  if (normalizer_ == Normalizer::kNfc && nfc_if_changed(text, normalized_storage)) {
    normalized = normalized_storage;
  }
  if (normalized_matcher_.empty()) {
    encode_normalized(normalized, ids, cache);
    return;
  }
  std::vector<TextSegment> segments;
  normalized_matcher_.split(normalized, segments);
  for (const TextSegment& segment : segments) {
    if (segment.token_id >= 0) {
      ids.push_back(static_cast<uint32_t>(segment.token_id));
    } else {
      encode_normalized(segment.text, ids, cache);
    }
  }
}

void Tokenizer::encode(std::string_view text, std::vector<uint32_t>& ids) const {
  std::unique_lock<std::mutex> lock(cache_->mutex, std::try_to_lock);
  Cache* cache = lock.owns_lock() ? cache_.get() : nullptr;
  if (raw_matcher_.empty()) {
    encode_plain(text, ids, cache);
    return;
  }
  std::vector<TextSegment> segments;
  raw_matcher_.split(text, segments);
  for (const TextSegment& segment : segments) {
    if (segment.token_id >= 0) {
      ids.push_back(static_cast<uint32_t>(segment.token_id));
    } else {
      encode_plain(segment.text, ids, cache);
    }
  }
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3);
  encode(text, ids);
  return ids;
}

std::string Tokenizer::decode_bytes(std::span<const uint32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (uint32_t id : ids) {
    if (id >= has_id_.size() || !has_id_[id]) {
      fail("cannot decode token id ", id, ": no token has it (the vocabulary has ", vocab_size(),
           " ids)");
    }
    if (skip_special_tokens && special_id_[id]) continue;
    bytes += bytes_of_id_[id];
  }
  return bytes;
}

std::string Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special_tokens) const {
  std::string bytes = decode_bytes(ids, skip_special_tokens);
  if (is_valid_utf8(bytes)) return bytes;
  return utf8_lossy(bytes);
}

}  // namespace lt::data
