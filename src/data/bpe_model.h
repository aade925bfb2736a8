#pragma once
// The BPE model: a vocabulary and ranked merges. A word (one pre-token)
// starts as one symbol per unit and merges the adjacent pair of lowest rank,
// leftmost first, until no pair merges. This is the order Hugging Face
// `tokenizers` uses, so ids match. Units are
//   - bytes, for byte-level BPE (GPT-2, Qwen, Llama 3): the vocabulary is
//     written in the byte-level alphabet (byte_level.h), and the word is the
//     raw bytes that the ByteLevel pre-tokenizer would map into it;
//   - characters, for SentencePiece-style BPE (Llama 2, Mistral, Gemma):
//     the vocabulary is plain UTF-8 with "▁" for spaces. A byte that is not
//     valid UTF-8 (HF's input cannot hold one) is a unit of its own, which
//     no vocabulary holds, so it falls back as an unknown character does.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/json_fields.h"

namespace lt::data {

struct BpeOptions {
  // Units are bytes in the byte-level alphabet (else UTF-8 characters).
  bool byte_level = true;
  // Llama-3: a word that is itself in the vocabulary is one token, merges or
  // not.
  bool ignore_merges = false;
  // A unit without a token becomes the tokens "<0xXX>" of its bytes if
  // there is one for each.
  bool byte_fallback = false;
  // Else it becomes the unknown token, runs of them fused into one if
  // `fuse_unk`. With neither, HF drops it; lazytrain refuses such a
  // vocabulary when loading it (see bytes_without_token and
  // may_drop_characters).
  std::optional<uint32_t> unk_id;
  bool fuse_unk = false;
};

class BpeModel {
 public:
  // `vocab` maps token strings, written in the byte-level alphabet, to ids;
  // `merges` lists token-string pairs, highest priority first. A merge whose
  // parts or result are not in the vocabulary is an error naming
  // `merges_field` and the merge's index.
  BpeModel(const std::vector<std::pair<std::string, uint32_t>>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges,
           const BpeOptions& options, const JsonField& merges_field);

  // Appends the ids of one word given as raw bytes.
  void encode_word(std::string_view word, std::vector<uint32_t>& ids) const;

  // The token's string in the byte-level alphabet, or nullptr if no token has
  // this id.
  const std::string* token_string(uint32_t id) const;
  std::optional<uint32_t> token_id(std::string_view token_string) const;
  // One past the largest id.
  size_t id_limit() const { return tokens_by_id_.size(); }
  // The bytes that encode_word would drop: no token of their own, no
  // "<0xXX>" token under byte_fallback, and no unknown token. Hugging Face
  // drops them without a word, so "a\0b" became two tokens; the loaders
  // refuse a vocabulary for which this is not empty.
  std::vector<uint8_t> bytes_without_token() const;
  // For a character-level model: whether a character outside the vocabulary
  // could be dropped, i.e. there is no unknown token and byte_fallback is
  // off or lacks some "<0xXX>".
  bool may_drop_characters() const;

 private:
  struct Merge {
    uint32_t rank;
    uint32_t result;
  };

  // Merges keyed by the pair of ids, in an open-addressing table: the hot
  // loop of encoding is these lookups.
  class MergeTable {
   public:
    void reserve(size_t count);
    void insert(uint32_t left, uint32_t right, Merge merge);
    const Merge* find(uint32_t left, uint32_t right) const {
      uint64_t key = pack(left, right);
      for (size_t slot = hash(key);; slot = (slot + 1) & mask_) {
        const Slot& s = slots_[slot];
        if (s.key == key) return &s.merge;
        if (s.key == kEmpty) return nullptr;
      }
    }

   private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    struct Slot {
      uint64_t key = kEmpty;
      Merge merge{};
    };
    static uint64_t pack(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }
    // Fibonacci hashing: the top bits of key * 2^64/phi.
    size_t hash(uint64_t key) const {
      return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    int shift_ = 64;
    size_t size_ = 0;
  };

  void initial_symbols(std::string_view word, std::vector<uint32_t>& symbols) const;
  void merge_short(std::vector<uint32_t>& symbols) const;
  void merge_long(std::vector<uint32_t>& symbols) const;

  std::unordered_map<std::string, uint32_t> id_of_token_;
  std::vector<std::string> tokens_by_id_;
  std::vector<bool> has_token_;
  MergeTable merges_;
  // Appends the unit's symbols (its token, its "<0xXX>" tokens, or the
  // unknown token) in HF's order; `pending_unk` carries an unknown token
  // not yet appended, which HF emits only at the next unit with a token.
  void append_unit(std::string_view unit, int64_t token, std::vector<uint32_t>& symbols,
                   std::optional<uint32_t>& pending_unk) const;

  // Byte-level: the token of each single byte; character-level: of each
  // ASCII character. -1 if none.
  std::array<int64_t, 256> byte_token_{};
  // "<0xXX>" tokens for byte_fallback, or -1.
  std::array<int64_t, 256> fallback_token_{};
  BpeOptions options_;
  // Word (raw bytes) -> id, only for ignore_merges.
  std::unordered_map<std::string, uint32_t> id_of_word_;
};

}  // namespace lt::data
