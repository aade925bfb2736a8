#pragma once
// A JSON value as an error message quotes it: its text, cut after
// kBriefJsonChars bytes (at a UTF-8 character's start) with a note of how
// long it was, so that a malformed file's multi-megabyte value does not
// become the message.
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace lt {

inline constexpr size_t kBriefJsonChars = 120;

template <class Json = nlohmann::json>  // nlohmann::json or ordered_json
std::string brief_json(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() <= kBriefJsonChars) return text;
  const size_t length = text.size();
  size_t cut = kBriefJsonChars;
  // Not inside a UTF-8 sequence: back off over its continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
  return text + "... (" + std::to_string(length) + " characters)";
}

}  // namespace lt
