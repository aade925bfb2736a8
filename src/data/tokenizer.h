#pragma once
// A BPE tokenizer read from a Hugging Face tokenizer.json, byte-level (GPT-2,
// Qwen2/2.5/3, Llama-3 and their kin) or SentencePiece-style (Llama 2,
// Mistral, Gemma: "▁" for spaces, byte fallback), or from GPT-2's
// encoder.json + vocab.bpe, or a SentencePiece tokenizer.model run by
// libsentencepiece (sentencepiece_model.h). Encoding gives the ids Hugging
// Face `tokenizers` gives with add_special_tokens=False:
//   1. added tokens (<|im_start|>, <s>, ...) are cut out of the raw text;
//   2. each rest is normalized (normalizer.h);
//   3. added tokens marked "normalized" are cut out of that;
//   4. the pre-tokenizer cuts the rest into words;
//   5. BPE turns each word into ids (through a cache).
// Decoding runs the file's decoder (decoder.h) on the tokens' strings.
//
// A Tokenizer is immutable after loading and safe to use from many threads.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/added_tokens.h"
#include "data/bpe_model.h"
#include "data/decoder.h"
#include "data/normalizer.h"
#include "data/pre_tokenizer.h"
#include "data/sentencepiece_model.h"

namespace lt::data {

class Tokenizer {
 public:
  // `path` is a tokenizer.json or a SentencePiece .model, or a folder
  // holding a tokenizer.json, else GPT-2's encoder.json and vocab.bpe, else
  // a tokenizer.model. Errors (missing file, bad JSON, an unsupported part)
  // are lt::Error naming the file and the field.
  static Tokenizer load(const std::filesystem::path& path);
  // Whether `path` is, or is a folder holding, what load() reads (which
  // may still refuse it).
  static bool found_at(const std::filesystem::path& path);
  static Tokenizer from_tokenizer_json(const std::filesystem::path& file);
  static Tokenizer from_sentencepiece_model(const std::filesystem::path& file);
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

  // The text of `ids` as HF decodes it, invalid UTF-8 replaced by U+FFFD.
  // An id with no token is an lt::Error.
  std::string decode(std::span<const uint32_t> ids, bool skip_special_tokens = false) const;
  // The bytes each id adds in the middle of a text, joined, without the
  // UTF-8 repair, so decode_bytes(a + b) == decode_bytes(a) + decode_bytes(b)
  // and new tokens' bytes can be appended one by one. For byte-level
  // tokenizers decode() is these bytes repaired; SentencePiece-style
  // decoders also drop the first token's leading space (Strip, Metaspace).
  std::string decode_bytes(std::span<const uint32_t> ids, bool skip_special_tokens = false) const;
  // Whether `id` has a token. A model's vocabulary is often padded past
  // its tokenizer's (Qwen2.5: 151,936 ids, 151,669 tokens); an id in the
  // padding has none.
  bool has_token(int64_t id) const;
  // decode() of the ids that have a token: one in the padding decodes to
  // nothing, as in Hugging Face's decode. For what a model generated.
  std::string decode_known(std::span<const int32_t> ids) const;

  // An added token's content or a vocabulary token's string (in the
  // model's alphabet: byte-level, or "▁" for spaces) to its id.
  std::optional<uint32_t> token_to_id(std::string_view token) const;
  // The string of `id` (a "normalized" added token's normalized content,
  // as HF gives it).
  std::optional<std::string> id_to_token(uint32_t id) const;
  // One past the largest id, added tokens included.
  size_t vocab_size() const;
  // One past the largest id of the vocabulary proper, added tokens aside
  // (a tokenizer.model's pieces are all its vocabulary).
  size_t vocab_size_without_added() const;
  // The file its tokens and ids were read from: a tokenizer.json, GPT-2's
  // encoder.json (or vocab.json), or a tokenizer.model.
  const std::filesystem::path& file() const { return file_; }
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }
  const Normalizer& normalizer() const { return normalizer_; }

 private:
  struct Cache;

  Tokenizer(BpeModel model, PreTokenizer pre_tokenizer, Normalizer normalizer, Decoder decoder,
            std::vector<AddedToken> added_tokens);
  explicit Tokenizer(std::unique_ptr<SentencePieceModel> sentencepiece);
  void build_decoding_table();
  // The token string of an id that has one (an added token's content
  // shadows the vocabulary's).
  const std::string& token_text(uint32_t id) const;
  void check_id(uint32_t id) const;
  // `starts_text`: the segment starts the whole input (Metaspace asks).
  void encode_plain(std::string_view text, bool starts_text, std::vector<uint32_t>& ids,
                    Cache* cache) const;
  void encode_normalized(std::string_view text, bool starts_text, std::vector<uint32_t>& ids,
                         Cache* cache) const;

  BpeModel model_;
  PreTokenizer pre_tokenizer_;
  Normalizer normalizer_;
  Decoder decoder_;
  std::vector<AddedToken> added_tokens_;
  // Set for a tokenizer.model: it encodes and decodes instead of the above.
  std::unique_ptr<SentencePieceModel> sentencepiece_;
  AddedTokenMatcher raw_matcher_;         // tokens with normalized == false
  AddedTokenMatcher normalized_matcher_;  // tokens with normalized == true
  // Each id's bytes in the middle of a text, and whether it is a special
  // token.
  std::vector<std::string> bytes_of_id_;
  std::vector<bool> has_id_;
  std::vector<bool> special_id_;
  // Index into added_tokens_ of the token with each id, or -1.
  std::vector<int32_t> added_index_;
  // Each added token's string as HF decodes it and id_to_token gives it:
  // the normalized content for a "normalized" token (Llama 2's Prepend
  // makes "<tok>" "▁<tok>"), else the content.
  std::vector<std::string> added_text_;
  std::unique_ptr<Cache> cache_;
  std::filesystem::path file_;
};

// The merges of GPT-2's vocab.bpe (or Hugging Face's merges.txt, the same
// file): an optional "#version" line, then one "left right" a line, in
// rank order. Errors name the file and the line.
std::vector<std::pair<std::string, std::string>> read_gpt2_merges(
    const std::filesystem::path& vocab_bpe);

// The start-up check of a command that runs or writes the model with this
// tokenizer (train, eval, generate, convert): that each of its ids has an
// embedding row, `vocab_size` of them as `config_file` gives. A vocabulary
// proper with an id at or past `vocab_size` is refused, naming both files
// and both numbers: the tokenizer is another model's. Warnings are
// returned, one a line ("" when none), for the caller to print: added
// tokens alone past the rows (Note [Added tokens past the embedding]), and
// an eos_token_id or bos_token_id of `config_file` that no token of the
// tokenizer has (Note [Special ids no token has]). Fewer ids than rows is
// normal: vocabularies are padded to a round size (Qwen2.5 has 151665 ids
// for 151936 rows), and the rows past the last id go unused.
std::string check_tokenizer_runs_model(const Tokenizer& tokenizer, int64_t vocab_size,
                                       const std::string& config_file);

}  // namespace lt::data
