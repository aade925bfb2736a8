#include "data/normalizer.h"

#include "data/unicode.h"

namespace lt::data {

namespace {

// HF's String pattern of Replace (normalizer and decoder alike); a Regex
// one would need a regex engine with Oniguruma's semantics, which no file
// lazytrain supports needs.
std::string literal_pattern(const nlohmann::json& value, const JsonField& field) {
  JsonField pattern_field = field.member("pattern");
  const nlohmann::json& pattern = require_member(value, field, "pattern");
  const nlohmann::json* literal = optional_member(pattern, pattern_field, "String");
  if (literal == nullptr) {
    pattern_field.fail("only {\"String\": ...} patterns are supported, found " +
                       brief_json(pattern));
  }
  std::string text = require_string(*literal, pattern_field.member("String"));
  if (text.empty()) pattern_field.member("String").fail("expected a non-empty string");
  return text;
}

}  // namespace

std::string require_one_character(const nlohmann::json& value, const JsonField& field,
                                  std::string_view key) {
  const nlohmann::json& member = require_member(value, field, key);
  std::string text = require_string(member, field.member(key));
  if (text.empty() || !is_valid_utf8(text) || decode_utf8(text, 0).length != text.size())
    field.member(key).fail("expected exactly one character, found " + brief_json(member));
  return text;
}

void append_replaced(std::string& out, std::string_view text, std::string_view pattern,
                     std::string_view content) {
  size_t pos = 0;
  for (size_t at; (at = text.find(pattern, pos)) != std::string_view::npos;
       pos = at + pattern.size()) {
    out.append(text.substr(pos, at - pos));
    out.append(content);
  }
  out.append(text.substr(pos));
}

std::pair<std::string, std::string> parse_replace(const nlohmann::json& value,
                                                  const JsonField& field) {
  std::string pattern = literal_pattern(value, field);
  return {pattern,
          require_string(require_member(value, field, "content"), field.member("content"))};
}

void Normalizer::parse_step(const nlohmann::json& value, const JsonField& field,
                            std::vector<Step>& steps) {
  const std::string type =
      require_string(require_member(value, field, "type"), field.member("type"));
  if (type == "NFC") {
    steps.push_back({Step::Kind::kNfc, "", ""});
  } else if (type == "Prepend") {
    steps.push_back(
        {Step::Kind::kPrepend, "",
         require_string(require_member(value, field, "prepend"), field.member("prepend"))});
  } else if (type == "Replace") {
    auto [pattern, content] = parse_replace(value, field);
    steps.push_back({Step::Kind::kReplace, std::move(pattern), std::move(content)});
  } else if (type == "Sequence") {
    const nlohmann::json& list = require_member(value, field, "normalizers");
    JsonField list_field = field.member("normalizers");
    if (!list.is_array()) list_field.fail("expected a list, found " + json_type_name(list));
    for (size_t i = 0; i < list.size(); ++i) parse_step(list[i], list_field.element(i), steps);
  } else {
    field.member("type").fail("unsupported normalizer \"" + type +
                              "\"; supported: NFC, Prepend, Replace, Sequence, or null");
  }
}

Normalizer Normalizer::from_json(const nlohmann::json* value, const JsonField& field) {
  Normalizer normalizer;
  if (value != nullptr) parse_step(*value, field, normalizer.steps_);
  return normalizer;
}

bool Normalizer::apply_if_changed(std::string_view text, std::string& out) const {
  // NFC alone, the byte-level tokenizers' case, copies nothing when the text
  // is already in NFC.
  if (steps_.size() == 1 && steps_[0].kind == Step::Kind::kNfc) return nfc_if_changed(text, out);
  if (steps_.empty()) return false;
  std::string current(text);
  std::string next;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kNfc:
        if (nfc_if_changed(current, next)) current.swap(next);
        break;
      case Step::Kind::kPrepend:
        // HF prepends nothing to an empty string.
        if (!current.empty()) current.insert(0, step.text);
        break;
      case Step::Kind::kReplace: {
        next.clear();
        append_replaced(next, current, step.pattern, step.text);
        current.swap(next);
        break;
      }
    }
  }
  if (current == text) return false;
  out = std::move(current);
  return true;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out;
  return apply_if_changed(text, out) ? out : std::string(text);
}

}  // namespace lt::data
