#pragma once
// A tokenizer.json (Hugging Face tokenizers' format) of byte tokens only: a
// ByteLevel pre-tokenizer and decoder and a BPE model without merges, so
// that each byte of text is one token of `vocab` (keys byte-level encoded,
// data/byte_level.h) and any other byte is <unk>. Tests build tiny
// vocabularies that fit a fixture model's ids with it.
#include <nlohmann/json.hpp>
#include <vector>

namespace lt::testing {

// `added_tokens`: {"id", "content", "special", "normalized"} objects.
inline nlohmann::json byte_level_tokenizer(const nlohmann::json& vocab,
                                           const std::vector<nlohmann::json>& added_tokens) {
  return {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json(added_tokens)},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", nlohmann::json::array()},
        {"unk_token", "<unk>"}}}};
}

// One special added token.
inline nlohmann::json special_token(int64_t id, const char* content) {
  return {{"id", id}, {"content", content}, {"special", true}, {"normalized", false}};
}

}  // namespace lt::testing
