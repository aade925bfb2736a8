#pragma once
// What the chat-template tests share: a tokenizer.json "added_tokens" entry
// for a special token, as Hugging Face writes one, and Qwen3's tokenizer with
// the Jinja goldens' special tokens added.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer_fixtures.h"

namespace lt::data::testing {

inline nlohmann::json special_added_token(uint32_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

// Writes dir/tokenizer.json: Qwen3's with `added` ({token: id}, as
// chat_template_jinja_goldens.json lists them) added as special tokens.
inline void write_qwen3_with_added_specials(const std::filesystem::path& dir,
                                            const nlohmann::json& added) {
  std::ifstream in(fixtures_dir() / "qwen3" / "tokenizer.json");
  nlohmann::json tokenizer = nlohmann::json::parse(in);
  // In the order of their ids, as the reference added them (a JSON object's
  // items come sorted by name): Hugging Face tokenizers numbers added tokens
  // in the order they come.
  std::vector<std::pair<uint32_t, std::string>> by_id;
  for (const auto& [token, id] : added.items()) by_id.emplace_back(id.get<uint32_t>(), token);
  std::sort(by_id.begin(), by_id.end());
  auto& tokens = tokenizer["added_tokens"];
  for (const auto& [id, token] : by_id) {
    const bool known = std::any_of(tokens.begin(), tokens.end(),
                                   [&](const auto& t) { return t.at("content") == token; });
    if (!known) tokens.push_back(special_added_token(id, token));
  }
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
}

}  // namespace lt::data::testing
