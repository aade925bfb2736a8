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

nlohmann::json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

// Loads `tokenizer` through a temporary tokenizer.json file.
std::unique_ptr<Tokenizer> load_json(const nlohmann::json& tokenizer, const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("lazytrain_tokenizer_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path file = dir / (name + ".json");
  std::ofstream(file) << tokenizer.dump();
  auto loaded = std::make_unique<Tokenizer>(Tokenizer::load(file));
  std::filesystem::remove_all(dir);
  return loaded;
}

const nlohmann::json& sentencepiece_variants() {
  static const nlohmann::json variants = read_json(fixtures_dir() / "llama2_style/variants.json");
  return variants;
}

// The "_style" variants, derived from the qwen3 file exactly as
// tokenizer_reference.derive_variant does.
nlohmann::json byte_level_variant(const std::string& name) {
  nlohmann::json tokenizer = read_json(fixtures_dir() / "qwen3" / "tokenizer.json");
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
  return tokenizer;
}

// A SentencePiece-style variant: the base file with the variant's fields
// replaced, as sentencepiece_reference.derive does.
nlohmann::json sentencepiece_variant(const std::string& name) {
  nlohmann::json tokenizer = read_json(fixtures_dir() / "llama2_style/tokenizer.json");
  for (const auto& [key, value] : sentencepiece_variants().at(name).items()) {
    if (key == "model") {
      for (const auto& [field, setting] : value.items()) tokenizer["model"][field] = setting;
    } else {
      tokenizer[key] = value;
    }
  }
  return tokenizer;
}

}  // namespace

std::filesystem::path fixtures_dir() {
  return std::filesystem::path(LT_SOURCE_DIR) / "tests/data/fixtures";
}

const std::vector<std::string>& reference_names() {
  static const std::vector<std::string> names = {"qwen3", "gpt2", "llama3_style", "roberta_style"};
  return names;
}

// The tokenizer called `name` (the names of both sets differ), loaded once.
static const Tokenizer& loaded_once(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[name];
  if (slot) return *slot;
  if (name == "qwen3" || name == "gpt2") {
    slot = std::make_unique<Tokenizer>(Tokenizer::load(fixtures_dir() / name));
  } else if (sentencepiece_variants().contains(name)) {
    slot = load_json(sentencepiece_variant(name), name);
  } else {
    slot = load_json(byte_level_variant(name), name);
  }
  return *slot;
}

const Tokenizer& reference_tokenizer(const std::string& name) {
  return loaded_once(name);
}

const std::vector<std::string>& sentencepiece_style_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const auto& [name, variant] : sentencepiece_variants().items()) list.push_back(name);
    return list;
  }();
  return names;
}

const Tokenizer& sentencepiece_style_tokenizer(const std::string& name) {
  return loaded_once(name);
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
