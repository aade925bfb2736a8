#pragma once
// What the chat-template tests share: a tokenizer.json "added_tokens" entry
// for a special token, as Hugging Face writes one.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace lt::data::testing {

inline nlohmann::json special_added_token(uint32_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

}  // namespace lt::data::testing
