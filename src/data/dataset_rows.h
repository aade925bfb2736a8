#pragma once
// Reading a dataset's JSON rows (dataset.cpp, chat_rows.cpp): a problem with
// one row is a RowError naming the field, which the loader reports with the
// row's line and skips.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

namespace lt::data::rows {

// Ordered: a chat template sees a message's fields, and prints tool-call
// arguments, in the row's order, as Python's json.loads keeps it.
using json = nlohmann::ordered_json;

// What is wrong with one row; caught per row and reported with its line.
struct RowError {
  std::string field;  // e.g. "conversations[2].value"; empty for the row as a whole
  std::string what;
};

[[noreturn]] inline void row_fail(std::string field, std::string what) {
  throw RowError{std::move(field), std::move(what)};
}

inline bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  });
}

// Parses one row; values nested deeper than kMaxRowDepth are not built (an
// ordered object copies its values as it grows, recursively, so a row
// nested 100,000 deep would overflow the stack) and the row is refused.
// Every row, tools string and tools file is parsed here, so what a chat
// template walks (its printing and tojson recurse) is that shallow too.
inline constexpr int kMaxRowDepth = 64;
inline json parse_row(std::string_view text) {
  bool too_deep = false;
  const json::parser_callback_t guard = [&](int depth, json::parse_event_t, json&) {
    if (depth <= kMaxRowDepth) return true;
    too_deep = true;
    return false;
  };
  json value = json::parse(text, guard);
  if (too_deep) row_fail("", "nests deeper than " + std::to_string(kMaxRowDepth));
  return value;
}

// The field `key`, or null when it is absent or null.
inline const json* member(const json& row, const std::string& key) {
  auto it = row.find(key);
  return it == row.end() || it->is_null() ? nullptr : &*it;
}

inline std::string string_field(const json& row, const std::string& key, const std::string& where) {
  const json* value = member(row, key);
  if (value == nullptr) row_fail(where, row.contains(key) ? "null (expected a string)" : "missing");
  if (!value->is_string())
    row_fail(where, std::string("expected a string, found ") + value->type_name());
  return value->get<std::string>();
}

inline std::string optional_string_field(const json& row, const std::string& key) {
  return member(row, key) ? string_field(row, key, key) : std::string();
}

inline std::string response_field(const json& row, const std::string& key,
                                  const std::string& where) {
  std::string text = string_field(row, key, where);
  if (is_blank(text)) row_fail(where, "empty response");
  return text;
}

}  // namespace lt::data::rows
