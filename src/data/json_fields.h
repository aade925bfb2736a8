#pragma once
// Reading fields of a tokenizer file so that every error names the file, the
// field (as a path like "model.merges[12]") and what was expected.
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace lt::data {

// Where a JSON value sits: the file and the path of the field inside it.
struct JsonField {
  std::string file;
  std::string path;

  JsonField member(std::string_view key) const {
    return {file, path.empty() ? std::string(key) : path + "." + std::string(key)};
  }
  JsonField element(size_t index) const { return {file, path + "[" + std::to_string(index) + "]"}; }

  [[noreturn]] void fail(const std::string& what) const {
    lt::fail(file, ": field \"", path.empty() ? std::string("(top level)") : path, "\": ", what);
  }
};

// The whole file as bytes; an error names the file.
inline std::string read_whole_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) lt::fail(file.string(), ": cannot open the file");
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) lt::fail(file.string(), ": read error");
  return contents.str();
}

inline std::string json_type_name(const nlohmann::json& value) {
  return value.type_name();
}

// The member `key` of the object `value`; fails if `value` is not an object
// or lacks it (null counts as missing).
inline const nlohmann::json& require_member(const nlohmann::json& value, const JsonField& field,
                                            std::string_view key) {
  if (!value.is_object()) field.fail("expected an object, found " + json_type_name(value));
  auto it = value.find(key);
  if (it == value.end() || it->is_null()) field.member(key).fail("missing");
  return *it;
}

// The member `key` if present and not null, else nullptr.
inline const nlohmann::json* optional_member(const nlohmann::json& value, const JsonField& field,
                                             std::string_view key) {
  if (!value.is_object()) field.fail("expected an object, found " + json_type_name(value));
  auto it = value.find(key);
  if (it == value.end() || it->is_null()) return nullptr;
  return &*it;
}

inline std::string require_string(const nlohmann::json& value, const JsonField& field) {
  if (!value.is_string()) field.fail("expected a string, found " + json_type_name(value));
  return value.get<std::string>();
}

inline bool require_bool(const nlohmann::json& value, const JsonField& field) {
  if (!value.is_boolean()) field.fail("expected true or false, found " + json_type_name(value));
  return value.get<bool>();
}

// A boolean member that defaults when absent or null.
inline bool optional_bool(const nlohmann::json& value, const JsonField& field, std::string_view key,
                          bool fallback) {
  const nlohmann::json* member = optional_member(value, field, key);
  return member ? require_bool(*member, field.member(key)) : fallback;
}

inline uint32_t require_token_id(const nlohmann::json& value, const JsonField& field) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > INT32_MAX) {
    field.fail("expected a token id (a non-negative integer), found " + value.dump());
  }
  return static_cast<uint32_t>(value.get<int64_t>());
}

}  // namespace lt::data
