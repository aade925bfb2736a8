#pragma once
// Tokenizers to pair with the fixture models (tests/models/fixtures/families,
// vocab_size 97: embedding rows for ids 0 to 96), for the tests of what the
// commands do with a tokenizer whose ids pass the rows or fit them.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "data/byte_level.h"
#include "support/byte_level_tokenizer.h"

namespace lt::testing {

// The llama fixture's folder.
inline std::filesystem::path llama_fixture() {
  return std::filesystem::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/llama";
}

// Qwen3's tokenizer.json (with its tokenizer_config.json): a vocabulary of
// ids 0 to 151642, then added tokens <|endoftext|> (151643) to </think>
// (151668). Every id past 96 is one a fixture model has no row for.
inline std::filesystem::path qwen3_tokenizer_dir() {
  return std::filesystem::path(LT_SOURCE_DIR) / "tests/data/fixtures/qwen3";
}

// Writes `folder`/tokenizer.json: <unk> at 0 and the 26 lowercase letters
// at 1 to 26, and the added token <|endoftext|> at `eos_id` (> 26); with
// `pad_id` (> eos_id), an added <pad> there too. As Hugging Face tokenizers
// numbers added tokens (after the vocabulary, in order), the vocabulary
// runs without holes up to the last added token: <unused_N> tokens fill
// the ids between, and <|endoftext|> before a <pad> is a vocabulary entry
// too (as GPT-2's is).
inline void write_letters_tokenizer(const std::filesystem::path& folder, int64_t eos_id,
                                    std::optional<int64_t> pad_id = std::nullopt) {
  nlohmann::json vocab = {{"<unk>", 0}};
  for (char c = 'a'; c <= 'z'; ++c) vocab[data::byte_level_encode(std::string(1, c))] = c - 'a' + 1;
  std::vector<nlohmann::json> added = {special_token(eos_id, "<|endoftext|>")};
  if (pad_id) {
    vocab["<|endoftext|>"] = eos_id;
    added.push_back(special_token(*pad_id, "<pad>"));
  }
  const int64_t last = pad_id ? *pad_id : eos_id;
  for (int64_t id = 27; id < last; ++id)
    if (id != eos_id) vocab["<unused_" + std::to_string(id) + ">"] = id;
  std::ofstream(folder / "tokenizer.json") << byte_level_tokenizer(vocab, added).dump();
}

// The llama fixture in a folder of its own, to give it a tokenizer.
inline std::filesystem::path copy_of_llama(const std::filesystem::path& folder) {
  std::filesystem::create_directories(folder);
  for (const auto& entry : std::filesystem::directory_iterator(llama_fixture()))
    std::filesystem::copy_file(entry.path(), folder / entry.path().filename());
  return folder;
}

}  // namespace lt::testing
