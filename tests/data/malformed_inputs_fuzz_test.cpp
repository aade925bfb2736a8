// Malformed tokenizer files (tokenizer.json, GPT-2's encoder.json +
// vocab.bpe, tokenizer_config.json) and datasets (JSONL, JSON arrays), made
// by damaging valid ones at random (rapidcheck): each either loads or is
// refused with an lt::Error whose message names the file. Nothing may
// crash, hang, or throw another exception type (nlohmann::json,
// std::bad_alloc from an absurd id, std::out_of_range, ...). Each property
// runs a bounded number of cases so the file stays a few seconds in CI.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/chat_template.h"
#include "data/dataset.h"
#include "data/token_rows.h"
#include "data/tokenizer.h"
#include "io/malformed_input_mutations.h"
#include "support/errors.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using namespace malformed;
using lt::testing::error_of;
using nlohmann::json;

// A folder removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = fs::temp_directory_path() /
            ("lt_malformed_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write(const fs::path& file, const std::string& contents) {
  std::ofstream(file, std::ios::binary) << contents;
}

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A small byte-level BPE tokenizer.json with every part the loader reads:
// a normalizer, a Split (Qwen2/Qwen3 pattern) + ByteLevel pre-tokenizer sequence, added tokens
// and a TemplateProcessing post-processor. Bytes without a token become
// <unk> (a vocabulary that would drop them is refused).
json tiny_tokenizer_json() {
  return json::parse(R"json({
    "version": "1.0",
    "added_tokens": [
      {"id": 6, "content": "<|im_start|>", "special": true, "normalized": false},
      {"id": 7, "content": "<|im_end|>", "special": true, "normalized": false},
      {"id": 8, "content": "<|endoftext|>", "special": true, "normalized": false,
       "lstrip": false, "rstrip": false, "single_word": false}
    ],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
    ]},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}}]},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>",
              "continuing_subword_prefix": "", "end_of_word_suffix": "",
              "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4, "c": 5,
                        "<unk>": 9},
              "merges": ["a b", ["\u0120", "ab"]]}
  })json");
}

// Encodes and decodes a little text with a tokenizer that loaded, so that a
// malformed file that slipped through shows up as a failure here too.
void use(const Tokenizer& tokenizer) {
  const std::vector<uint32_t> ids = tokenizer.encode("ab ab<|im_end|>c\xC3\xA9 x");
  tokenizer.decode(ids);
}

TEST(MalformedTokenizerJson, ByteMutationsLoadOrNameTheFile) {
  ScratchDir dir;
  const fs::path file = dir / "tokenizer.json";
  const std::string seed = tiny_tokenizer_json().dump(1);
  check_cases(500, [&] {
    const std::string text = mutate_bytes(seed, seed.size());
    RC_LOG() << "tokenizer.json: " << text << "\n";
    write(file, text);
    RC_ASSERT(misbehaviour({file.string()}, [&] { use(Tokenizer::load(file)); }) == "");
  });
}

TEST(MalformedTokenizerJson, FieldMutationsLoadOrNameTheFile) {
  ScratchDir dir;
  const fs::path file = dir / "tokenizer.json";
  const json seed = tiny_tokenizer_json();
  check_cases(800, [&] {
    json mutated = seed;
    const int changes = *rc::gen::inRange(1, 3);
    for (int i = 0; i < changes; ++i) mutate_json(mutated, {"normalizer", "pre_tokenizer"}, 5);
    RC_LOG() << "tokenizer.json: " << mutated.dump() << "\n";
    write(file, mutated.dump());
    RC_ASSERT(misbehaviour({file.string()}, [&] { use(Tokenizer::load(file)); }) == "");
  });
}

TEST(MalformedGpt2Files, MutationsLoadOrNameAFile) {
  ScratchDir dir;
  const fs::path encoder = dir / "encoder.json", merges = dir / "vocab.bpe";
  // Every byte has a token: GPT-2's files have no unknown token.
  const json encoder_seed = testing::with_every_byte(
      json::parse(
          R"({"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4, "c": 5, "<|endoftext|>": 6})"),
      100);
  const std::string merges_seed = "#version: 0.2\na b\n\u0120 ab\n";
  check_cases(500, [&] {
    json mutated = encoder_seed;
    std::string encoder_text = encoder_seed.dump();
    std::string merges_text = merges_seed;
    switch (*rc::gen::inRange(0, 3)) {
      case 0:
        mutate_json(mutated, {}, 1);
        encoder_text = mutated.dump();
        break;
      case 1:
        encoder_text = mutate_bytes(encoder_text, encoder_text.size());
        break;
      default:
        merges_text = mutate_bytes(merges_text, merges_text.size());
        break;
    }
    RC_LOG() << "encoder.json: " << encoder_text << "\nvocab.bpe: " << merges_text << "\n";
    write(encoder, encoder_text);
    write(merges, merges_text);
    RC_ASSERT(misbehaviour({encoder.string(), merges.string()},
                           [&] { use(Tokenizer::from_gpt2_files(encoder, merges)); }) == "");
  });
}

// tokenizer_config.json (Qwen3's own, with its chat template) and the
// tokenizer.json post-processor beside it, damaged, as a dataset load reads
// them: the template kind, the EOS token and the prefix ids.
TEST(MalformedTokenizerConfig, MutationsLoadOrNameAFile) {
  ScratchDir dir;
  const fs::path config = dir / "tokenizer_config.json", tokenizer = dir / "tokenizer.json";
  const json config_seed =
      json::parse(read(testing::fixtures_dir() / "qwen3" / "tokenizer_config.json"));
  const json tokenizer_seed = tiny_tokenizer_json();
  const Tokenizer tiny = [&] {
    write(tokenizer, tokenizer_seed.dump());
    return Tokenizer::load(tokenizer);
  }();
  check_cases(400, [&] {
    json mutated_config = config_seed, mutated_tokenizer = tokenizer_seed;
    if (*rc::gen::inRange(0, 3) == 0) {
      mutate_json(mutated_tokenizer, {"post_processor"}, 5);
    } else {
      mutate_json(mutated_config, {"eos_token", "bos_token", "chat_template"}, 3);
    }
    std::string config_text = mutated_config.dump();
    if (*rc::gen::inRange(0, 4) == 0) config_text = mutate_bytes(config_text, config_text.size());
    RC_LOG() << "tokenizer_config.json: " << config_text
             << "\ntokenizer.json: " << mutated_tokenizer.dump() << "\n";
    write(config, config_text);
    write(tokenizer, mutated_tokenizer.dump());
    RC_ASSERT(misbehaviour({config.string(), tokenizer.string()}, [&] {
                TokenizerConfig c = read_tokenizer_config(tokenizer);
                resolve_template_kind("auto", c);
                resolve_special_ids(tiny, c);
              }) == "");
  });
}

// Valid rows of each dataset format, as JSON values (one row per element).
const std::vector<std::vector<json>>& dataset_seeds() {
  static const std::vector<std::vector<json>> seeds = {
      {json::parse(R"({"input_ids": [1, 2, 3]})"),
       json::parse(R"({"input_ids": [4, 5, 6, 7], "labels": [-100, -100, 6, 7]})")},
      {json::parse(R"({"instruction": "Say hi.", "input": "", "output": "Hi!"})"),
       json::parse(
           R"({"instruction": "Add.", "input": "1+1", "output": "2", "system": "Be terse."})")},
      {json::parse(
           R"({"conversations": [{"from": "system", "value": "Be kind."}, {"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello!"}]})"),
       json::parse(
           R"({"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]})")},
      {json::parse(R"({"question": "1+1?", "answer": "2"})"),
       json::parse(R"({"question": "2+3?", "answer": "5"})")},
      {json::parse(R"({"text": "Some plain text."})"), json::parse(R"({"text": "More text."})")},
  };
  return seeds;
}

TEST(MalformedDataset, MutationsLoadOrNameTheFile) {
  ScratchDir dir;
  const Tokenizer& tokenizer = testing::reference_tokenizer("qwen3");
  // Qwen3's tokenizer_config.json (chat template, EOS) without the 11 MB
  // tokenizer.json beside it, which every load would parse again.
  fs::copy(testing::fixtures_dir() / "qwen3" / "tokenizer_config.json",
           dir / "tokenizer_config.json");
  check_cases(400, [&] {
    const auto& seeds = dataset_seeds();
    std::vector<json> rows = seeds[*rc::gen::inRange<size_t>(0, seeds.size())];
    const int changes = *rc::gen::inRange(0, 3);
    for (int i = 0; i < changes; ++i) {
      mutate_json(rows[*rc::gen::inRange<size_t>(0, rows.size())],
                  {"input_ids", "labels", "conversations", "text", "output"}, 4);
    }
    const bool array = *rc::gen::arbitrary<bool>();
    std::string text = array ? json(rows).dump(1) : "";
    if (!array) {
      for (const json& row : rows) text += row.dump() + "\n";
    }
    if (changes == 0 || *rc::gen::inRange(0, 3) == 0) text = mutate_bytes(text, text.size());
    const fs::path file = dir / (array ? "rows.json" : "rows.jsonl");
    RC_LOG() << file.filename().string() << ": " << text << "\n";
    write(file, text);
    DatasetOptions options;
    options.strict = *rc::gen::arbitrary<bool>();
    options.tokenizer_path = dir.path();
    DatasetReport report;
    RC_ASSERT(misbehaviour({file.string()},
                           [&] { load_dataset(file, &tokenizer, options, &report); }) == "");
    // The rows `lazytrain eval` reads, with its own reader.
    if (!array) {
      const auto vocab = static_cast<int64_t>(tokenizer.vocab_size());
      RC_ASSERT(misbehaviour({file.string()}, [&] { read_token_rows(file, vocab); }) == "");
    }
  });
}

// ---- regressions: inputs the properties (or a look at the code) found ----

// A vocabulary id of 2^31 - 1 sized the id tables for 2^31 tokens: loading
// ended in std::bad_alloc instead of an error naming the file and field.
TEST(MalformedTokenizerRegression, AbsurdVocabularyIdNamesTheFileAndField) {
  ScratchDir dir;
  const fs::path encoder = dir / "encoder.json", merges = dir / "vocab.bpe";
  write(
      encoder,
      R"({"<|endoftext|>": 2147483647, "a": 0, "ab": 2, "b": 1, "c": 5, "\u0120": 3, "\u0120ab": 4})");
  write(merges, "#version: 0.2\na b\n\u0120 ab\n");
  const std::string message = error_of([&] { Tokenizer::from_gpt2_files(encoder, merges); });
  EXPECT_NE(message.find(encoder.string()), std::string::npos) << message;
  EXPECT_NE(message.find("<|endoftext|>"), std::string::npos) << message;
  EXPECT_NE(message.find("2147483647"), std::string::npos) << message;
}

TEST(MalformedTokenizerRegression, AbsurdAddedTokenIdNamesTheFileAndField) {
  ScratchDir dir;
  const fs::path file = dir / "tokenizer.json";
  json tokenizer = tiny_tokenizer_json();
  tokenizer["added_tokens"][0]["id"] = 2147483647;
  write(file, tokenizer.dump());
  const std::string message = error_of([&] { Tokenizer::load(file); });
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("added_tokens[0].id"), std::string::npos) << message;
}

// Ids up to the bound still load (a sparse vocabulary is legal).
TEST(MalformedTokenizerRegression, LargeButPlausibleIdsStillLoad) {
  ScratchDir dir;
  const fs::path file = dir / "tokenizer.json";
  json tokenizer = tiny_tokenizer_json();
  tokenizer["added_tokens"][0]["id"] = 262143;  // Gemma 3's largest id
  write(file, tokenizer.dump());
  const Tokenizer loaded = Tokenizer::load(file);
  EXPECT_EQ(loaded.vocab_size(), 262144u);
  EXPECT_EQ(loaded.token_to_id("<|im_start|>"), 262143u);
}

// A post-processor naming a special token the tokenizer lacks: the error
// named "tokenizer.json" but not which one.
TEST(MalformedTokenizerRegression, UnknownPostProcessorTokenNamesTheFile) {
  ScratchDir dir;
  const fs::path file = dir / "tokenizer.json";
  json tokenizer = tiny_tokenizer_json();
  write(file, tokenizer.dump());
  const Tokenizer loaded = Tokenizer::load(file);
  tokenizer["post_processor"]["single"][0]["SpecialToken"]["id"] = "<|begin_of_text|>";
  write(file, tokenizer.dump());
  const std::string message =
      error_of([&] { resolve_special_ids(loaded, read_tokenizer_config(file)); });
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("<|begin_of_text|>"), std::string::npos) << message;
}

// Nesting far deeper than any tokenizer.json: an error, not a stack
// overflow (the normalizer and pre-tokenizer readers recurse into
// Sequences, and error messages print the offending value).
TEST(MalformedTokenizerRegression, DeepNestingIsAnError) {
  ScratchDir dir;
  const fs::path file = dir / "tokenizer.json";
  const std::string seed = tiny_tokenizer_json().dump();
  constexpr int kDepth = 200000;
  std::string sequences;
  for (int i = 0; i < kDepth; ++i) sequences += R"({"type": "Sequence", "normalizers": [)";
  sequences += R"({"type": "NFC"})";
  for (int i = 0; i < kDepth; ++i) sequences += "]}";
  json tokenizer = tiny_tokenizer_json();
  tokenizer["normalizer"] = "@";
  std::string text = tokenizer.dump();
  text.replace(text.find("\"@\""), 3, sequences);
  write(file, text);
  std::string message = error_of([&] { Tokenizer::load(file); });
  EXPECT_NE(message.find(file.string()), std::string::npos) << message.substr(0, 300);

  // An array nested as deep where a merge belongs.
  tokenizer = tiny_tokenizer_json();
  tokenizer["model"]["merges"][0] = "@";
  text = tokenizer.dump();
  text.replace(text.find("\"@\""), 3, std::string(kDepth, '[') + std::string(kDepth, ']'));
  write(file, text);
  message = error_of([&] { Tokenizer::load(file); });
  EXPECT_NE(message.find(file.string()), std::string::npos) << message.substr(0, 300);
}

// A vocab.bpe line of invalid UTF-8 naming a token the vocabulary lacks:
// quoting the token for the message threw nlohmann's type_error 316.
TEST(MalformedTokenizerRegression, InvalidUtf8MergeNamesTheFile) {
  ScratchDir dir;
  const fs::path encoder = dir / "encoder.json", merges = dir / "vocab.bpe";
  write(encoder, R"({"a": 0, "b": 1, "ab": 2})");
  write(merges, "#version: 0.2\n\xFF b\n");
  const std::string message = error_of([&] { Tokenizer::from_gpt2_files(encoder, merges); });
  EXPECT_NE(message.find(merges.string()), std::string::npos) << message;
  EXPECT_NE(message.find("merges[0]"), std::string::npos) << message;
}

// A label of 2^64 - 100 wrapped to -100 (the ignore label) and was
// accepted; it is outside the vocabulary like any other huge id.
TEST(MalformedDatasetRegression, HugeUnsignedLabelIsNotTheIgnoreLabel) {
  ScratchDir dir;
  const fs::path file = dir / "rows.jsonl";
  write(file, "{\"input_ids\": [1, 2], \"labels\": [18446744073709551516, 2]}\n");
  DatasetOptions options;
  options.strict = true;
  const std::string message = error_of([&] { load_dataset(file, nullptr, options, nullptr); });
  EXPECT_NE(message.find(file.string() + ":1"), std::string::npos) << message;
  EXPECT_NE(message.find("labels[0]"), std::string::npos) << message;
  EXPECT_NE(message.find("18446744073709551516"), std::string::npos) << message;
}

}  // namespace
}  // namespace lt::data
