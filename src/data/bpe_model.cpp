#include "data/bpe_model.h"

#include <cstdio>
#include <queue>

#include "data/byte_level.h"
#include "data/unicode.h"

namespace lt::data {

namespace {

// Words up to this many symbols merge by rescanning the pair ranks
// (quadratic, but no allocation and tiny constants); longer ones use a heap.
// Almost every word of natural text is shorter.
constexpr size_t kShortWordSymbols = 48;
constexpr uint32_t kNoMerge = UINT32_MAX;

}  // namespace

void BpeModel::MergeTable::reserve(size_t count) {
  size_t capacity = 16;
  int bits = 4;
  while (capacity < count * 2) {  // load factor <= 1/2 keeps probes short
    capacity *= 2;
    ++bits;
  }
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - bits;
  size_ = 0;
}

void BpeModel::MergeTable::insert(uint32_t left, uint32_t right, Merge merge) {
  if ((size_ + 1) * 2 > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    reserve(size_ + 1);
    for (const Slot& s : old) {
      if (s.key != kEmpty)
        insert(static_cast<uint32_t>(s.key >> 32), static_cast<uint32_t>(s.key), s.merge);
    }
  }
  uint64_t key = pack(left, right);
  for (size_t slot = hash(key);; slot = (slot + 1) & mask_) {
    Slot& s = slots_[slot];
    if (s.key == key) {
      s.merge = merge;  // a repeated pair takes its later rank, as in HF
      return;
    }
    if (s.key == kEmpty) {
      s = {key, merge};
      ++size_;
      return;
    }
  }
}

BpeModel::BpeModel(const std::vector<std::pair<std::string, uint32_t>>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   const BpeOptions& options, const JsonField& merges_field)
    : options_(options) {
  id_of_token_.reserve(vocab.size());
  for (const auto& [token, id] : vocab) {
    id_of_token_[token] = id;
    if (id >= tokens_by_id_.size()) {
      tokens_by_id_.resize(id + 1);
      has_token_.resize(id + 1, false);
    }
    tokens_by_id_[id] = token;
    has_token_[id] = true;
  }

  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto find = [&](const std::string& token, const char* role) {
      auto it = id_of_token_.find(token);
      if (it == id_of_token_.end()) {
        // Merges from GPT-2's vocab.bpe are raw bytes, not parsed JSON, and
        // dump() throws json::type_error on invalid UTF-8 unless told to
        // replace it (U+FFFD).
        const std::string quoted =
            nlohmann::json(token).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        merges_field.element(rank).fail(std::string(role) + " token " + quoted +
                                        " is not in the vocabulary (model.vocab)");
      }
      return it->second;
    };
    uint32_t left_id = find(left, "left");
    uint32_t right_id = find(right, "right");
    uint32_t result_id = find(left + right, "merged");
    merges_.insert(left_id, right_id, {static_cast<uint32_t>(rank), result_id});
  }

  const auto& chars = byte_level_chars();
  for (int byte = 0; byte < 256; ++byte) {
    std::string unit;
    if (options_.byte_level) {
      append_utf8(unit, chars[byte]);
    } else if (byte < 0x80) {
      unit = std::string(1, static_cast<char>(byte));
    }
    auto it = unit.empty() ? id_of_token_.end() : id_of_token_.find(unit);
    byte_token_[byte] = it == id_of_token_.end() ? int64_t{-1} : int64_t{it->second};
    char fallback[8];
    std::snprintf(fallback, sizeof(fallback), "<0x%02X>", byte);
    auto fallback_it = id_of_token_.find(fallback);
    fallback_token_[byte] =
        fallback_it == id_of_token_.end() ? int64_t{-1} : int64_t{fallback_it->second};
  }

  if (options_.ignore_merges) {
    id_of_word_.reserve(vocab.size());
    for (const auto& [token, id] : vocab) {
      if (!options_.byte_level) {
        id_of_word_[token] = id;
      } else if (std::optional<std::string> bytes = byte_level_decode(token)) {
        id_of_word_[*bytes] = id;
      }
    }
  }
}

std::vector<uint8_t> BpeModel::bytes_without_token() const {
  std::vector<uint8_t> missing;
  if (options_.unk_id || !options_.byte_level) return missing;
  for (int byte = 0; byte < 256; ++byte) {
    if (byte_token_[byte] >= 0 || (options_.byte_fallback && fallback_token_[byte] >= 0)) continue;
    missing.push_back(static_cast<uint8_t>(byte));
  }
  return missing;
}

bool BpeModel::may_drop_characters() const {
  if (options_.byte_level || options_.unk_id) return false;
  if (!options_.byte_fallback) return true;
  for (int64_t token : fallback_token_) {
    if (token < 0) return true;
  }
  return false;
}

const std::string* BpeModel::token_string(uint32_t id) const {
  if (id >= tokens_by_id_.size() || !has_token_[id]) return nullptr;
  return &tokens_by_id_[id];
}

std::optional<uint32_t> BpeModel::token_id(std::string_view token_string) const {
  auto it = id_of_token_.find(std::string(token_string));
  if (it == id_of_token_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::append_unit(std::string_view unit, int64_t token, std::vector<uint32_t>& symbols,
                           std::optional<uint32_t>& pending_unk) const {
  if (token >= 0) {
    if (pending_unk) symbols.push_back(*pending_unk);
    pending_unk.reset();
    symbols.push_back(static_cast<uint32_t>(token));
    return;
  }
  if (options_.byte_fallback) {
    bool every_byte = true;
    for (char c : unit) every_byte = every_byte && fallback_token_[static_cast<uint8_t>(c)] >= 0;
    if (every_byte) {
      // HF appends these before an unknown token still pending.
      for (char c : unit)
        symbols.push_back(static_cast<uint32_t>(fallback_token_[static_cast<uint8_t>(c)]));
      return;
    }
  }
  if (!options_.unk_id) return;  // HF drops the unit
  if (pending_unk && !options_.fuse_unk) symbols.push_back(*pending_unk);
  pending_unk = options_.unk_id;
}

void BpeModel::initial_symbols(std::string_view word, std::vector<uint32_t>& symbols) const {
  std::optional<uint32_t> pending_unk;
  for (size_t pos = 0; pos < word.size();) {
    auto byte = static_cast<unsigned char>(word[pos]);
    size_t length = 1;
    int64_t token = byte_token_[byte];
    if (!options_.byte_level && byte >= 0x80) {
      DecodedChar ch = decode_utf8_multibyte(word, pos);
      length = ch.length;
      if (ch.code_point != kInvalidCodePoint) {
        auto it = id_of_token_.find(std::string(word.substr(pos, length)));
        if (it != id_of_token_.end()) token = it->second;
      }
    }
    append_unit(word.substr(pos, length), token, symbols, pending_unk);
    pos += length;
  }
  if (pending_unk) symbols.push_back(*pending_unk);
}

void BpeModel::merge_short(std::vector<uint32_t>& symbols) const {
  // ranks[i] / results[i]: the merge of symbols[i] and symbols[i + 1].
  uint32_t ranks[kShortWordSymbols];
  uint32_t results[kShortWordSymbols];
  size_t count = symbols.size();
  auto lookup = [&](size_t i) {
    const Merge* merge = merges_.find(symbols[i], symbols[i + 1]);
    ranks[i] = merge ? merge->rank : kNoMerge;
    results[i] = merge ? merge->result : 0;
  };
  for (size_t i = 0; i + 1 < count; ++i) lookup(i);
  while (count > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < count; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNoMerge) break;
    symbols[best] = results[best];
    for (size_t i = best + 1; i + 1 < count; ++i) {
      symbols[i] = symbols[i + 1];
      ranks[i] = ranks[i + 1];
      results[i] = results[i + 1];
    }
    --count;
    symbols.resize(count);
    if (best > 0) lookup(best - 1);
    if (best + 1 < count) lookup(best);
  }
}

void BpeModel::merge_long(std::vector<uint32_t>& symbols) const {
  // Symbols form a linked list; the heap holds candidate merges ordered by
  // (rank, position). A candidate is stale once either side has merged
  // elsewhere, which shows as a changed pair at its position.
  struct Candidate {
    uint32_t rank;
    uint32_t position;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  size_t count = symbols.size();
  std::vector<int64_t> next(count), previous(count);
  std::vector<bool> alive(count, true);
  for (size_t i = 0; i < count; ++i) {
    next[i] = i + 1 < count ? static_cast<int64_t>(i + 1) : -1;
    previous[i] = static_cast<int64_t>(i) - 1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int64_t left) {
    if (left < 0 || next[left] < 0) return;
    if (const Merge* merge = merges_.find(symbols[left], symbols[next[left]])) {
      heap.push({merge->rank, static_cast<uint32_t>(left)});
    }
  };
  for (size_t i = 0; i + 1 < count; ++i) push(static_cast<int64_t>(i));
  while (!heap.empty()) {
    Candidate top = heap.top();
    heap.pop();
    int64_t left = top.position;
    if (!alive[left] || next[left] < 0) continue;
    int64_t right = next[left];
    const Merge* merge = merges_.find(symbols[left], symbols[right]);
    if (merge == nullptr || merge->rank != top.rank) continue;
    symbols[left] = merge->result;
    alive[right] = false;
    next[left] = next[right];
    if (next[right] >= 0) previous[next[right]] = left;
    push(previous[left]);
    push(left);
  }
  size_t write = 0;
  for (size_t i = 0; i < count; ++i) {
    if (alive[i]) symbols[write++] = symbols[i];
  }
  symbols.resize(write);
}

void BpeModel::encode_word(std::string_view word, std::vector<uint32_t>& ids) const {
  if (options_.ignore_merges) {
    auto it = id_of_word_.find(std::string(word));
    if (it != id_of_word_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  thread_local std::vector<uint32_t> symbols;
  symbols.clear();
  initial_symbols(word, symbols);
  if (symbols.size() <= kShortWordSymbols) {
    merge_short(symbols);
  } else {
    merge_long(symbols);
  }
  ids.insert(ids.end(), symbols.begin(), symbols.end());
}

}  // namespace lt::data
