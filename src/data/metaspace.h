#pragma once
// SentencePiece's meta symbol, as Hugging Face `tokenizers` has it: the
// Metaspace pre-tokenizer writes each space as "▁" (U+2581), may put one in
// front of the text, and may cut the text before each "▁"; the Metaspace
// decoder turns "▁" back into spaces.
#include <nlohmann/json.hpp>

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "data/json_fields.h"

namespace lt::data {

// Where a "▁" is put in front of a piece that does not start with one.
enum class PrependScheme {
  kAlways,  // every piece: after an added token too
  kFirst,   // only the piece at the very start of the text
  kNever,
};

struct Metaspace {
  std::string replacement = "\u2581";  // exactly one character, UTF-8
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;

  // A "Metaspace" pre-tokenizer or decoder object. As in HF, prepend_scheme
  // defaults to "always", an old file's "add_prefix_space": false means
  // "never", and split defaults to true.
  static Metaspace from_json(const nlohmann::json& value, const JsonField& field);

  // Pre-tokenizes `piece`, which starts the whole text when `starts_text`
  // (what HF tests with the piece's original offset 0), appending its
  // pieces. They point into `piece` or into `arena`.
  void pre_tokenize(std::string_view piece, bool starts_text, std::vector<std::string_view>& pieces,
                    std::deque<std::string>& arena) const;

  // The decoder on one token: each "▁" becomes a space, except that the
  // first token's are dropped unless the scheme is kNever (HF drops them
  // all, not only the leading one).
  std::string decode_token(std::string_view token, bool first_token) const;
};

}  // namespace lt::data
