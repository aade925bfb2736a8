#pragma once
// A JSON value as an error message quotes it: its text, cut after
// kBriefJsonChars characters with a note of how long it was, so that a
// malformed file's multi-megabyte value does not become the message.
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace lt {

inline constexpr size_t kBriefJsonChars = 120;

inline std::string brief_json(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() <= kBriefJsonChars) return text;
  const size_t length = text.size();
  text.resize(kBriefJsonChars);
  return text + "... (" + std::to_string(length) + " characters)";
}

}  // namespace lt
