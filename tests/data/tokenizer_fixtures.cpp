#include "tokenizer_fixtures.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "data/byte_level.h"

namespace lt::data::testing {

namespace {

constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The "_style" variants, derived from the qwen3 file exactly as
// tokenizer_reference.derive_variant does.
std::filesystem::path write_variant(const std::string& name) {
  std::ifstream in(fixtures_dir() / "qwen3" / "tokenizer.json");
  nlohmann::json tokenizer = nlohmann::json::parse(in);
  tokenizer["normalizer"] = nullptr;
  if (name == "llama3_style") {
    tokenizer["pre_tokenizer"] = {{"type", "Sequence"},
                                  {"pretokenizers",
                                   {{{"type", "Split"},
                                     {"pattern", {{"Regex", kLlama3Pattern}}},
                                     {"behavior", "Isolated"},
                                     {"invert", false}},
                                    {{"type", "ByteLevel"},
                                     {"add_prefix_space", false},
                                     {"trim_offsets", true},
                                     {"use_regex", false}}}}};
    tokenizer["model"]["ignore_merges"] = true;
  } else if (name == "roberta_style") {
    tokenizer["pre_tokenizer"] = {{"type", "ByteLevel"},
                                  {"add_prefix_space", true},
                                  {"trim_offsets", true},
                                  {"use_regex", true}};
  } else {
    fail("unknown tokenizer variant ", name);
  }
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("lazytrain_tokenizer_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path file = dir / (name + ".json");
  std::ofstream(file) << tokenizer.dump();
  return file;
}

}  // namespace

std::filesystem::path fixtures_dir() {
  return std::filesystem::path(LT_SOURCE_DIR) / "tests/data/fixtures";
}

const std::vector<std::string>& reference_names() {
  static const std::vector<std::string> names = {"qwen3", "gpt2", "llama3_style", "roberta_style"};
  return names;
}

const Tokenizer& reference_tokenizer(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[name];
  if (!slot) {
    if (name == "qwen3") {
      slot = std::make_unique<Tokenizer>(Tokenizer::load(fixtures_dir() / "qwen3"));
    } else if (name == "gpt2") {
      slot = std::make_unique<Tokenizer>(Tokenizer::load(fixtures_dir() / "gpt2"));
    } else {
      std::filesystem::path file = write_variant(name);
      slot = std::make_unique<Tokenizer>(Tokenizer::load(file));
      std::filesystem::remove_all(file.parent_path());
    }
  }
  return *slot;
}

SplitPattern pattern_named(const std::string& name) {
  if (name == "gpt2") return SplitPattern::kGpt2;
  if (name == "qwen2") return SplitPattern::kQwen2;
  if (name == "llama3") return SplitPattern::kLlama3;
  fail("unknown pattern ", name);
}

std::vector<std::string> split_pieces(SplitPattern pattern, const std::string& text) {
  std::vector<std::string> pieces;
  for (size_t pos = 0; pos < text.size();) {
    size_t length = split_match_length(pattern, text, pos);
    pieces.push_back(text.substr(pos, length));
    pos += length;
  }
  return pieces;
}

std::string escaped(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

nlohmann::json with_every_byte(nlohmann::json vocab, uint32_t first_id) {
  for (int byte = 0; byte < 256; ++byte) {
    const std::string token = byte_level_encode(std::string(1, static_cast<char>(byte)));
    if (!vocab.contains(token)) vocab[token] = first_id + static_cast<uint32_t>(byte);
  }
  return vocab;
}

}  // namespace lt::data::testing
