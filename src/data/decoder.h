#pragma once
// Decoders: turning a sequence of token strings back into text, as Hugging
// Face `tokenizers` does. A decoder is a chain of steps, each mapping the
// list of tokens to a new list, and the text is the last list joined:
//   ByteLevel     the byte-level alphabet back to bytes (byte-level BPE);
//   Metaspace     "▁" back to spaces, the first token's dropped;
//   Replace       a string by another, token by token;
//   ByteFallback  runs of "<0xXX>" tokens to their bytes, one U+FFFD per
//                 byte when the run is not UTF-8;
//   Fuse          all tokens into one;
//   Strip         up to `start` / `stop` copies of a character off each
//                 token's ends (after Fuse: the text's ends).
// Llama 2 and Mistral use Sequence[Replace("▁", " "), ByteFallback, Fuse,
// Strip(" ", 1, 0)].
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "data/json_fields.h"
#include "data/metaspace.h"

namespace lt::data {

class Decoder {
 public:
  // The "decoder" field of a tokenizer.json. Null or missing decodes as
  // ByteLevel for a byte-level model (the bytes are what the model holds)
  // and, as in HF, joins the tokens with spaces otherwise.
  static Decoder from_json(const nlohmann::json* value, const JsonField& field, bool byte_level);

  // True when the decoder is ByteLevel alone: the text is each token's bytes
  // joined, with invalid UTF-8 repaired, and needs no token list.
  bool is_byte_level() const;

  // HF's decode of `tokens` (token strings, added tokens' contents).
  std::string decode(std::vector<std::string> tokens) const;

  // The bytes `token` adds in the middle of a text: the steps as they act
  // on a token that is neither first nor last (no Strip after Fuse, no
  // dropped "▁"), and raw bytes where HF would put U+FFFD. Joining these
  // for a sequence gives its bytes token by token.
  std::string middle_bytes(std::string_view token) const;

 private:
  struct Step {
    enum class Kind { kByteLevel, kMetaspace, kReplace, kByteFallback, kFuse, kStrip } kind;
    std::string pattern;  // kReplace; kStrip: the character
    std::string content;  // kReplace
    Metaspace metaspace;  // kMetaspace
    size_t start = 0;     // kStrip
    size_t stop = 0;      // kStrip
  };
  enum class Mode { kExact, kMiddle };

  static void parse_step(const nlohmann::json& value, const JsonField& field,
                         std::vector<Step>& steps);
  std::vector<std::string> run(std::vector<std::string> tokens, Mode mode) const;

  std::vector<Step> steps_;
  bool join_with_spaces_ = false;  // no decoder and not byte-level
};

}  // namespace lt::data
