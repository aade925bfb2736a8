#pragma once
// The tokenizers the tests compare with Hugging Face `tokenizers`, by the
// names tools/reference/tokenizer_reference.py gives them: "qwen3", "gpt2",
// "llama3_style", "roberta_style".
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/pre_tokenizer.h"
#include "data/tokenizer.h"

namespace lt::data::testing {

std::filesystem::path fixtures_dir();
const std::vector<std::string>& reference_names();
// Loaded once per process and shared.
const Tokenizer& reference_tokenizer(const std::string& name);
// The SentencePiece-style variants of fixtures/llama2_style, by the names
// tools/reference/sentencepiece_reference.py gives them (its variants.json:
// "llama2_style", "mistral_style", ...). Loaded once per process.
const std::vector<std::string>& sentencepiece_style_names();
const Tokenizer& sentencepiece_style_tokenizer(const std::string& name);
// Pattern names as in tokenizer_reference.PATTERNS.
SplitPattern pattern_named(const std::string& name);
std::vector<std::string> split_pieces(SplitPattern pattern, const std::string& text);
// Printable form of a string for failure messages (\uXXXX for non-ASCII).
std::string escaped(const std::string& text);
// `vocab` (token string -> id) plus a token for each of the 256 bytes it
// lacks, numbered from `first_id` in byte order. Released byte-level
// vocabularies have all 256, and the loader refuses one that would drop a
// byte, so the tests' tiny vocabularies need them too.
nlohmann::json with_every_byte(nlohmann::json vocab, uint32_t first_id);

}  // namespace lt::data::testing
