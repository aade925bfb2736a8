#include "data/pre_tokenizer.h"

#include "data/unicode.h"

namespace lt::data {

namespace {

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct CharAt {
  CharClass cls;
  char32_t code_point;
  uint32_t length;
};

inline CharAt char_at(std::string_view text, size_t pos) {
  DecodedChar ch = decode_utf8(text, pos);
  return {char_class(ch.code_point), ch.code_point, ch.length};
}

// End of the run of characters of class `cls` that starts at `pos`.
inline size_t run_end(std::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    auto byte = static_cast<unsigned char>(text[pos]);
    if (byte < 0x80) {
      if (detail::kAsciiClass[byte] != cls) break;
      ++pos;
      continue;
    }
    CharAt ch = char_at(text, pos);
    if (ch.cls != cls) break;
    pos += ch.length;
  }
  return pos;
}

inline char lower_ascii(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

// Length of the contraction 's|'t|'re|'ve|'m|'ll|'d at text[pos] (which is
// an apostrophe), or 0. Case-insensitive matching follows Oniguruma's case
// folding: besides ASCII, U+017F LATIN SMALL LETTER LONG S folds to 's'.
size_t contraction_length(std::string_view text, size_t pos, bool ignore_case) {
  auto at = [&](size_t i) -> char {
    if (pos + i >= text.size()) return '\0';
    return ignore_case ? lower_ascii(text[pos + i]) : text[pos + i];
  };
  char first = at(1);
  if (first == 's' || first == 't' || first == 'm' || first == 'd') return 2;
  if ((first == 'r' || first == 'v') && at(2) == 'e') return 3;
  if (first == 'l' && at(2) == 'l') return 3;
  if (ignore_case && first == '\xC5' && at(2) == '\xBF') return 3;  // 'ſ (U+017F)
  return 0;
}

// The end of \s+(?!\S) | \s+ at a whitespace character: the whole run when
// it reaches the end of the text, else all but its last character (which is
// left to join the following word), but at least one character.
size_t whitespace_match_end(std::string_view text, size_t pos) {
  size_t last_start = pos;
  size_t end = pos;
  while (end < text.size()) {
    CharAt ch = char_at(text, end);
    if (ch.cls != CharClass::kSpace) break;
    last_start = end;
    end += ch.length;
  }
  if (end == text.size() || last_start == pos) return end;
  return last_start;
}

size_t gpt2_match_length(std::string_view text, size_t pos) {
  char c = text[pos];
  if (c == '\'') {
    if (size_t n = contraction_length(text, pos, /*ignore_case=*/false)) return n;
  }
  // ` ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+`: an optional space, then a run.
  size_t start = pos;
  if (c == ' ' && pos + 1 < text.size()) {
    CharAt next = char_at(text, pos + 1);
    if (next.cls != CharClass::kSpace) return run_end(text, pos + 1, next.cls) - start;
  }
  CharAt ch = char_at(text, pos);
  if (ch.cls != CharClass::kSpace) return run_end(text, pos, ch.cls) - start;
  return whitespace_match_end(text, pos) - start;
}

bool is_cr_or_lf(char32_t cp) {
  return cp == '\r' || cp == '\n';
}

size_t cl100k_match_length(std::string_view text, size_t pos, size_t max_digits) {
  char c = text[pos];
  if (c == '\'') {
    if (size_t n = contraction_length(text, pos, /*ignore_case=*/true)) return n;
  }
  CharAt ch = char_at(text, pos);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (ch.cls == CharClass::kLetter) return run_end(text, pos, CharClass::kLetter) - pos;
  if (ch.cls != CharClass::kNumber && !is_cr_or_lf(ch.code_point) &&
      pos + ch.length < text.size()) {
    CharAt next = char_at(text, pos + ch.length);
    if (next.cls == CharClass::kLetter)
      return run_end(text, pos + ch.length, CharClass::kLetter) - pos;
  }
  // \p{N}{1,max_digits}
  if (ch.cls == CharClass::kNumber) {
    size_t end = pos;
    for (size_t digits = 0; digits < max_digits && end < text.size(); ++digits) {
      CharAt digit = char_at(text, end);
      if (digit.cls != CharClass::kNumber) break;
      end += digit.length;
    }
    return end - pos;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t other_start = pos;
  if (c == ' ' && pos + 1 < text.size() && char_at(text, pos + 1).cls == CharClass::kOther) {
    other_start = pos + 1;
  }
  if (other_start != pos || ch.cls == CharClass::kOther) {
    size_t end = run_end(text, other_start, CharClass::kOther);
    while (end < text.size() && (text[end] == '\r' || text[end] == '\n')) ++end;
    return end - pos;
  }
  // ch is whitespace. `\s*[\r\n]+`: up to the last CR or LF of the run.
  size_t after_last_newline = 0;
  for (size_t end = pos; end < text.size();) {
    CharAt space = char_at(text, end);
    if (space.cls != CharClass::kSpace) break;
    end += space.length;
    if (is_cr_or_lf(space.code_point)) after_last_newline = end;
  }
  if (after_last_newline != 0) return after_last_newline - pos;
  return whitespace_match_end(text, pos) - pos;
}

}  // namespace

std::optional<SplitPattern> recognize_split_pattern(std::string_view regex) {
  if (regex == kGpt2Regex) return SplitPattern::kGpt2;
  if (regex == kQwen2Regex) return SplitPattern::kQwen2;
  if (regex == kLlama3Regex) return SplitPattern::kLlama3;
  return std::nullopt;
}

size_t split_match_length(SplitPattern pattern, std::string_view text, size_t pos) {
  switch (pattern) {
    case SplitPattern::kGpt2:
      return gpt2_match_length(text, pos);
    case SplitPattern::kQwen2:
      return cl100k_match_length(text, pos, 1);
    case SplitPattern::kLlama3:
      return cl100k_match_length(text, pos, 3);
  }
  return text.size() - pos;
}

PreTokenizer PreTokenizer::gpt2() {
  PreTokenizer pre_tokenizer;
  pre_tokenizer.steps_.push_back({SplitPattern::kGpt2, false, std::nullopt, std::nullopt});
  pre_tokenizer.byte_level_ = true;
  return pre_tokenizer;
}

void PreTokenizer::parse_step(const nlohmann::json& value, const JsonField& field,
                              std::vector<Step>& steps, bool& saw_byte_level) {
  std::string type = require_string(require_member(value, field, "type"), field.member("type"));
  if (type == "Sequence") {
    JsonField list_field = field.member("pretokenizers");
    const nlohmann::json& list = require_member(value, field, "pretokenizers");
    if (!list.is_array()) list_field.fail("expected a list, found " + json_type_name(list));
    for (size_t i = 0; i < list.size(); ++i)
      parse_step(list[i], list_field.element(i), steps, saw_byte_level);
    return;
  }
  if (type == "ByteLevel") {
    // A second ByteLevel maps the first one's alphabet through the byte
    // table again (Hugging Face tokenizers does): no vocabulary is written
    // in that doubly-mapped alphabet, and it was taken as one.
    if (saw_byte_level)
      field.fail(
          "a second ByteLevel pre-tokenizer: one maps bytes to the vocabulary's alphabet, "
          "and a second would map them again; keep one");
    saw_byte_level = true;
    Step step;
    step.add_prefix_space = optional_bool(value, field, "add_prefix_space", true);
    if (optional_bool(value, field, "use_regex", true)) step.pattern = SplitPattern::kGpt2;
    // Without a regex or a prefix space, ByteLevel only maps bytes to its
    // alphabet, which the BPE model does on its own.
    if (step.pattern || step.add_prefix_space) steps.push_back(step);
    return;
  }
  if (type == "Split") {
    JsonField pattern_field = field.member("pattern");
    const nlohmann::json& pattern = require_member(value, field, "pattern");
    if (optional_bool(value, field, "invert", false)) field.member("invert").fail("expected false");
    if (const nlohmann::json* literal = optional_member(pattern, pattern_field, "String")) {
      std::string text = require_string(*literal, pattern_field.member("String"));
      steps.push_back(
          {std::nullopt, false, std::nullopt, LiteralSplit::from_json(value, field, text)});
      return;
    }
    const nlohmann::json* regex = optional_member(pattern, pattern_field, "Regex");
    if (regex == nullptr) {
      pattern_field.fail(
          "expected {\"String\": ...} or {\"Regex\": ...} (of the known tokenizers), found " +
          brief_json(pattern));
    }
    std::string regex_text = require_string(*regex, pattern_field.member("Regex"));
    std::optional<SplitPattern> known = recognize_split_pattern(regex_text);
    if (!known) {
      pattern_field.member("Regex").fail(
          "unknown pre-tokenizer pattern " + nlohmann::json(regex_text).dump() +
          "; known are the patterns of GPT-2, Qwen2/Qwen3 and Llama-3 (each runs as a hand-written "
          "scanner)");
    }
    std::string behavior =
        require_string(require_member(value, field, "behavior"), field.member("behavior"));
    if (behavior != "Isolated") {
      field.member("behavior").fail("expected \"Isolated\", found \"" + behavior + "\"");
    }
    steps.push_back({known, false, std::nullopt, std::nullopt});
    return;
  }
  if (type == "Metaspace") {
    steps.push_back({std::nullopt, false, Metaspace::from_json(value, field), std::nullopt});
    return;
  }
  field.member("type").fail("unknown pre-tokenizer type \"" + type +
                            "\"; supported: ByteLevel, Split, Metaspace, Sequence, or null");
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json* value, const JsonField& field) {
  PreTokenizer pre_tokenizer;
  bool saw_byte_level = false;
  if (value != nullptr) parse_step(*value, field, pre_tokenizer.steps_, saw_byte_level);
  for (const Step& step : pre_tokenizer.steps_) {
    if (saw_byte_level && step.metaspace) {
      field.fail(
          "ByteLevel and Metaspace together: a model's vocabulary is either byte-level or "
          "SentencePiece-style, not both");
    }
  }
  pre_tokenizer.byte_level_ = saw_byte_level;
  return pre_tokenizer;
}

void PreTokenizer::split(std::string_view text, bool starts_text,
                         std::vector<std::string_view>& pieces,
                         std::deque<std::string>& arena) const {
  if (text.empty()) return;
  if (steps_.empty()) {
    pieces.push_back(text);
    return;
  }
  // The common case, one regex step and no prefix space, cuts straight into
  // `pieces`.
  if (steps_.size() == 1 && steps_[0].pattern && !steps_[0].add_prefix_space) {
    for (size_t pos = 0; pos < text.size();) {
      size_t length = split_match_length(*steps_[0].pattern, text, pos);
      pieces.push_back(text.substr(pos, length));
      pos += length;
    }
    return;
  }
  // Each step splits every piece the previous steps made.
  std::vector<std::string_view> current{text};
  std::vector<std::string_view> next;
  for (const Step& step : steps_) {
    next.clear();
    for (size_t i = 0; i < current.size(); ++i) {
      std::string_view piece = current[i];
      if (step.metaspace) {
        // Pieces cover the text in order, so only the first can start it.
        step.metaspace->pre_tokenize(piece, starts_text && i == 0, next, arena);
        continue;
      }
      if (step.literal) {
        step.literal->split(piece, next);
        continue;
      }
      if (step.add_prefix_space && piece.front() != ' ') {
        arena.push_back(" " + std::string(piece));
        piece = arena.back();
      }
      if (!step.pattern) {
        next.push_back(piece);
        continue;
      }
      for (size_t pos = 0; pos < piece.size();) {
        size_t length = split_match_length(*step.pattern, piece, pos);
        next.push_back(piece.substr(pos, length));
        pos += length;
      }
    }
    current.swap(next);
  }
  pieces.insert(pieces.end(), current.begin(), current.end());
}

}  // namespace lt::data
