#pragma once
// The tokenizers the tests compare with Hugging Face `tokenizers`, by the
// names tools/reference/tokenizer_reference.py gives them: "qwen3", "gpt2",
// "llama3_style", "roberta_style".
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
// Pattern names as in tokenizer_reference.PATTERNS.
SplitPattern pattern_named(const std::string& name);
std::vector<std::string> split_pieces(SplitPattern pattern, const std::string& text);
// Printable form of a string for failure messages (\uXXXX for non-ASCII).
std::string escaped(const std::string& text);

}  // namespace lt::data::testing
