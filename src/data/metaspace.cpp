#include "data/metaspace.h"

#include <utility>
#include "data/normalizer.h"

namespace lt::data {

Metaspace Metaspace::from_json(const nlohmann::json& value, const JsonField& field) {
  Metaspace metaspace;
  metaspace.replacement = require_one_character(value, field, "replacement");
  if (const nlohmann::json* scheme = optional_member(value, field, "prepend_scheme")) {
    JsonField scheme_field = field.member("prepend_scheme");
    const std::string name = require_string(*scheme, scheme_field);
    static constexpr std::pair<const char*, PrependScheme> kNames[] = {
        {"always", PrependScheme::kAlways},
        {"first", PrependScheme::kFirst},
        {"never", PrependScheme::kNever}};
    bool known = false;
    for (const auto& [scheme_name, value_of_name] : kNames) {
      if (name == scheme_name) {
        metaspace.prepend_scheme = value_of_name;
        known = true;
      }
    }
    if (!known)
      scheme_field.fail("expected \"always\", \"first\" or \"never\", found \"" + name + "\"");
  }
  if (!optional_bool(value, field, "add_prefix_space", true))
    metaspace.prepend_scheme = PrependScheme::kNever;
  metaspace.split = optional_bool(value, field, "split", true);
  return metaspace;
}

void Metaspace::pre_tokenize(std::string_view piece, bool starts_text,
                             std::vector<std::string_view>& pieces,
                             std::deque<std::string>& arena) const {
  if (piece.empty()) return;
  std::string& text = arena.emplace_back();
  const bool prepend = !piece.starts_with(" ") && !piece.starts_with(replacement) &&
                       (prepend_scheme == PrependScheme::kAlways ||
                        (prepend_scheme == PrependScheme::kFirst && starts_text));
  if (prepend) text = replacement;
  append_replaced(text, piece, " ", replacement);
  std::string_view whole = text;
  if (!split) {
    pieces.push_back(whole);
    return;
  }
  // HF's MergedWithNext: a cut before every "▁" but one that starts the text.
  size_t start = 0;
  for (size_t at = whole.find(replacement, 1); at != std::string_view::npos;
       at = whole.find(replacement, at + 1)) {
    pieces.push_back(whole.substr(start, at - start));
    start = at;
  }
  pieces.push_back(whole.substr(start));
}

std::string Metaspace::decode_token(std::string_view token, bool first_token) const {
  std::string out;
  const bool drop = first_token && prepend_scheme != PrependScheme::kNever;
  append_replaced(out, token, replacement, drop ? "" : " ");
  return out;
}

}  // namespace lt::data
