#pragma once
// A byte-level BPE tokenizer read from a Hugging Face tokenizer.json (GPT-2,
// Qwen2/2.5/3, Llama-3 and their kin) or from GPT-2's encoder.json +
// vocab.bpe. Encoding gives the ids Hugging Face `tokenizers` gives with
// add_special_tokens=False:
//   1. added tokens (<|im_start|>, ...) are cut out of the raw text;
//   2. the rest is normalized (NFC or nothing);
//   3. added tokens marked "normalized" are cut out of that;
//   4. the pre-tokenizer cuts the rest into words;
//   5. BPE turns each word's bytes into ids (through a cache).
// Decoding joins the tokens' bytes and repairs invalid UTF-8 with U+FFFD, as
// HF's ByteLevel decoder does.
//
// A Tokenizer is immutable after loading and safe to use from many threads.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/added_tokens.h"
#include "data/bpe_model.h"
#include "data/pre_tokenizer.h"

namespace lt::data {

enum class Normalizer { kNone, kNfc };

class Tokenizer {
 public:
  // `path` is a tokenizer.json, or a folder holding one, or a folder holding
  // GPT-2's encoder.json and vocab.bpe. Errors (missing file, bad JSON, an
  // unsupported part) are lt::Error naming the file and the field.
  static Tokenizer load(const std::filesystem::path& path);
  static Tokenizer from_tokenizer_json(const std::filesystem::path& file);
  // GPT-2's original files: ByteLevel pre-tokenization with no prefix
  // space, and <|endoftext|> as a special token when the vocabulary has it
  // (as GPT-2's tokenizer.json and transformers' GPT2Tokenizer do).
  static Tokenizer from_gpt2_files(const std::filesystem::path& encoder_json,
                                   const std::filesystem::path& vocab_bpe);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // The ids of `text` (any bytes; invalid UTF-8 still encodes, byte by
  // byte). No special tokens are added: no BOS, no EOS.
  std::vector<uint32_t> encode(std::string_view text) const;
  void encode(std::string_view text, std::vector<uint32_t>& ids) const;

  // The text of `ids`, invalid UTF-8 replaced by U+FFFD. An id with no
  // token is an lt::Error.
  std::string decode(std::span<const uint32_t> ids, bool skip_special_tokens = false) const;
  // The raw bytes of `ids`, without the UTF-8 repair.
  std::string decode_bytes(std::span<const uint32_t> ids, bool skip_special_tokens = false) const;

  // An added token's content or a vocabulary token's string (byte-level
  // alphabet) to its id.
  std::optional<uint32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(uint32_t id) const;
  // One past the largest id, added tokens included.
  size_t vocab_size() const;
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }
  Normalizer normalizer() const { return normalizer_; }

 private:
  struct Cache;

  Tokenizer(BpeModel model, PreTokenizer pre_tokenizer, Normalizer normalizer,
            std::vector<AddedToken> added_tokens);
  void build_decoding_table();
  void encode_plain(std::string_view text, std::vector<uint32_t>& ids, Cache* cache) const;
  void encode_normalized(std::string_view text, std::vector<uint32_t>& ids, Cache* cache) const;

  BpeModel model_;
  PreTokenizer pre_tokenizer_;
  Normalizer normalizer_;
  std::vector<AddedToken> added_tokens_;
  AddedTokenMatcher raw_matcher_;         // tokens with normalized == false
  AddedTokenMatcher normalized_matcher_;  // tokens with normalized == true
  // Each id's bytes when decoded, and whether it is a special token.
  std::vector<std::string> bytes_of_id_;
  std::vector<bool> has_id_;
  std::vector<bool> special_id_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace lt::data
