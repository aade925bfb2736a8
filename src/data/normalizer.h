#pragma once
// The normalizers of the tokenizer.json files lazytrain reads, run as
// Hugging Face `tokenizers` runs them: NFC (Qwen), and the Llama 2
// conversion's Prepend("▁") + Replace(" " -> "▁"), each alone or in a
// Sequence. Anything else is refused when loading.
#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/json_fields.h"

namespace lt::data {

// A Replace normalizer's or decoder's (pattern, content); only a
// {"String": ...} pattern is supported.
std::pair<std::string, std::string> parse_replace(const nlohmann::json& value,
                                                  const JsonField& field);

// A string field that must hold exactly one character (Metaspace's
// replacement, Strip's content).
std::string require_one_character(const nlohmann::json& value, const JsonField& field,
                                  std::string_view key);

// Appends `text` with every `pattern` (not empty) replaced by `content`,
// left to right and not overlapping, as HF's Replace does.
void append_replaced(std::string& out, std::string_view text, std::string_view pattern,
                     std::string_view content);

class Normalizer {
 public:
  // The "normalizer" field of a tokenizer.json (`value` null when the field
  // is null or missing: no normalization).
  static Normalizer from_json(const nlohmann::json* value, const JsonField& field);

  bool empty() const { return steps_.empty(); }

  // Writes the normalized `text` to `out` and returns true, or returns false
  // when normalizing leaves `text` as it is (then `out` is untouched, and
  // nothing was copied: the common case for NFC).
  bool apply_if_changed(std::string_view text, std::string& out) const;
  std::string apply(std::string_view text) const;

 private:
  struct Step {
    enum class Kind { kNfc, kPrepend, kReplace } kind;
    // kPrepend: `text` goes before a non-empty string. kReplace: every
    // `pattern` (not empty) becomes `text`, left to right, not overlapping.
    std::string pattern;
    std::string text;
  };

  static void parse_step(const nlohmann::json& value, const JsonField& field,
                         std::vector<Step>& steps);

  std::vector<Step> steps_;
};

}  // namespace lt::data
