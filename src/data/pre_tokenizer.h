#pragma once
// Pre-tokenization: cutting normalized text into the pieces ("words") that
// BPE encodes one at a time. Hugging Face tokenizers do this with a regex;
// the few regexes byte-level BPE tokenizers actually ship are recognized by
// their exact pattern string and run as hand-written scanners that never
// backtrack, so the cost is linear in the text whatever its shape. An
// unknown pattern is refused rather than approximated.
#include <nlohmann/json.hpp>

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/json_fields.h"
#include "data/metaspace.h"
#include "data/pre_tokenizer_split.h"

namespace lt::data {

enum class SplitPattern {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  // GPT-2, and the ByteLevel pre-tokenizer's built-in regex.
  kGpt2,
  // (?i:'s|...|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+  -- Qwen2, Qwen2.5, Qwen3: digits one by one.
  kQwen2,
  // The same with \p{N}{1,3}: Llama-3 and OpenAI's cl100k.
  kLlama3,
};

// The scanner for a regex string from a tokenizer file, or nullopt.
std::optional<SplitPattern> recognize_split_pattern(std::string_view regex);

// Length in bytes of the pattern's match at text[pos]. Each known pattern
// matches at every position (its alternatives cover every character), so
// repeated calls cut the whole text into consecutive pieces.
size_t split_match_length(SplitPattern pattern, std::string_view text, size_t pos);

class PreTokenizer {
 public:
  // Reads the "pre_tokenizer" field of a tokenizer.json (`value` null when
  // the field is null or missing: the text is one word). Supported: ByteLevel,
  // Split with a known regex or a literal string, Metaspace, and Sequences
  // of them; ByteLevel and Metaspace do not mix.
  static PreTokenizer from_json(const nlohmann::json* value, const JsonField& field);
  // GPT-2's: ByteLevel with its built-in regex and no prefix space.
  static PreTokenizer gpt2();

  // Whether there is a ByteLevel step: the model's units are then bytes in
  // the byte-level alphabet (bpe_model.h), else characters.
  bool byte_level() const { return byte_level_; }

  // Appends the pieces of `text` to `pieces`. They point into `text`, or
  // into `arena` where a step rewrote a piece. `starts_text`: `text` starts
  // the whole input (Metaspace's prepend_scheme "first" asks).
  void split(std::string_view text, bool starts_text, std::vector<std::string_view>& pieces,
             std::deque<std::string>& arena) const;

 private:
  struct Step {
    // A regex split (Split, or ByteLevel with use_regex), else none.
    std::optional<SplitPattern> pattern;
    // ByteLevel's add_prefix_space: a space goes before each piece that
    // does not start with one.
    bool add_prefix_space = false;
    // A Metaspace step, or a Split on a literal string (then none of the
    // above).
    std::optional<Metaspace> metaspace;
    std::optional<LiteralSplit> literal;
  };

  static void parse_step(const nlohmann::json& value, const JsonField& field,
                         std::vector<Step>& steps, bool& saw_byte_level);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace lt::data
