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
#include "core/json_brief.h"
#include "core/regular_file.h"

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

// Tokenizer files nest a few levels (a Sequence of pre-tokenizers holding a
// Split holding its pattern is 4); their readers recurse into Sequences, and
// error messages print offending values (json::dump recurses too), so a
// malformed file nested 100,000 deep overflowed the stack. Deeper values
// are discarded unbuilt while parsing, and the file is refused.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text`, the contents of `file`; `filter` (optional) is a
// nlohmann parser callback applied as well. Errors name the file.
inline nlohmann::json parse_json_text(const std::string& text, const std::filesystem::path& file,
                                      const nlohmann::json::parser_callback_t& filter = nullptr) {
  bool too_deep = false;
  const nlohmann::json::parser_callback_t guard =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (depth > kMaxJsonDepth) {
          too_deep = true;
          return false;
        }
        return filter ? filter(depth, event, parsed) : true;
      };
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text, guard);
  } catch (const nlohmann::json::parse_error& e) {
    lt::fail(file.string(), ": not valid JSON (", e.what(), ")");
  }
  if (too_deep) {
    lt::fail(file.string(), ": nests deeper than ", kMaxJsonDepth,
             " levels, which no tokenizer file does");
  }
  return root;
}

// The whole file as bytes; an error names the file. Only a regular file is
// read (io/regular_file.h says why).
inline std::string read_whole_file(const std::filesystem::path& file) {
  require_regular_file(file);
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

// Token ids index tables with one entry per id up to the largest (the
// model's token strings, the decoder's bytes), so one absurd id in a
// malformed file (2147483647) would make loading allocate tens of GB and
// fail with std::bad_alloc. Real vocabularies stay far below this bound
// (Gemma 3: 262,144 tokens; Qwen3: 151,669); 2^22 leaves 16x room and keeps
// the tables of a hostile file to a few hundred MB.
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;

inline uint32_t require_token_id(const nlohmann::json& value, const JsonField& field) {
  // Compared as uint64_t: get<int64_t> would wrap values above INT64_MAX.
  if (!value.is_number_integer() || (!value.is_number_unsigned() && value.get<int64_t>() < 0)) {
    field.fail("expected a token id (a non-negative integer), found " + brief_json(value));
  }
  if (value.get<uint64_t>() > uint64_t{kMaxTokenId}) {
    field.fail("token id " + brief_json(value) + " is beyond the largest supported id " +
               std::to_string(kMaxTokenId));
  }
  return static_cast<uint32_t>(value.get<uint64_t>());
}

}  // namespace lt::data
