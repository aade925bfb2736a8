// Reading tokenizer files: hand-checked encodings of tiny files, both forms
// of merges, and malformed files whose errors must name the file and field.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "data/tokenizer.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

#define EXPECT_MENTIONS(message, text)               \
  EXPECT_NE((message).find(text), std::string::npos) \
      << "'" << (message) << "' lacks '" << (text) << "'"

class TokenizerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lazytrain_tokenizer_files_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& contents) {
    fs::path file = dir_ / name;
    std::ofstream(file, std::ios::binary) << contents;
    return file;
  }

  // A tiny byte-level tokenizer: "a", "b", "ab", "Ġ" (space), "Ġab", the
  // special token <|end|>, and the other 253 bytes from id 100.
  static json tiny(json merges) {
    json tokenizer = tiny_without_every_byte(std::move(merges));
    tokenizer["model"]["vocab"] = testing::with_every_byte(tokenizer["model"]["vocab"], 100);
    return tokenizer;
  }
  static json tiny_without_every_byte(json merges) {
    return {{"version", "1.0"},
            {"added_tokens",
             {{{"id", 5}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}}}},
            {"normalizer", nullptr},
            {"pre_tokenizer",
             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model",
             {{"type", "BPE"},
              {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"\u0120", 3}, {"\u0120ab", 4}}},
              {"merges", merges}}}};
  }

  // The message of the lt::Error that loading `file` throws.
  static std::string load_error(const fs::path& file) {
    try {
      Tokenizer::load(file);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "loading " << file << " did not fail";
    return "";
  }

  fs::path dir_;
};

TEST_F(TokenizerFiles, ReadsBothFormsOfMerges) {
  for (json merges : {json::array({"a b", "\u0120 ab"}),
                      json::array({json::array({"a", "b"}), json::array({"\u0120", "ab"})})}) {
    Tokenizer tokenizer = Tokenizer::load(write("tokenizer.json", tiny(merges).dump()));
    // "ab ab<|end|>b": words "ab", " ab", then the special token, then "b".
    EXPECT_EQ(tokenizer.encode("ab ab<|end|>b"), (std::vector<uint32_t>{2, 4, 5, 1}));
    EXPECT_EQ(tokenizer.decode(std::vector<uint32_t>{2, 4, 5, 1}), "ab ab<|end|>b");
    EXPECT_EQ(tokenizer.decode(std::vector<uint32_t>{2, 5}, /*skip_special_tokens=*/true), "ab");
  }
}

// Hugging Face drops a byte that has no token, no "<0xXX>" fallback and no
// unknown token (BPE::merge_word in tokenizers), so "a\0b" became "ab"
// and the byte was lost without a word: such a vocabulary is refused.
TEST_F(TokenizerFiles, AVocabularyThatWouldDropABytesIsRefused) {
  const fs::path file =
      write("tokenizer.json", tiny_without_every_byte(json::array({"a b"})).dump());
  const std::string message = load_error(file);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("model.vocab"), std::string::npos) << message;
  EXPECT_NE(message.find("byte 0x00"), std::string::npos) << message;
  // 256 bytes less "a", "b" and the space.
  EXPECT_NE(message.find("253 of 256 bytes"), std::string::npos) << message;

  // GPT-2's own files: the error names encoder.json.
  fs::remove(file);
  write("encoder.json", R"({"a": 0, "b": 1, "ab": 2})");
  write("vocab.bpe", "#version: 0.2\na b\n");
  const std::string gpt2 = load_error(dir_);
  EXPECT_NE(gpt2.find((dir_ / "encoder.json").string()), std::string::npos) << gpt2;
  EXPECT_NE(gpt2.find("byte 0x00"), std::string::npos) << gpt2;
}

// With an unknown token a missing byte becomes it, as in Hugging Face: its
// BPE tests give "accb" -> a, <unk>, <unk>, b (test_unk_not_fused) and,
// with fuse_unk, a, <unk>, b (test_unk_get_fused). Nothing is dropped.
TEST_F(TokenizerFiles, AMissingByteBecomesTheUnknownTokenAsHuggingFaceDoes) {
  json tokenizer = tiny_without_every_byte(json::array());
  tokenizer["model"]["vocab"]["<unk>"] = 6;
  tokenizer["model"]["unk_token"] = "<unk>";
  Tokenizer unfused = Tokenizer::load(write("tokenizer.json", tokenizer.dump()));
  EXPECT_EQ(unfused.encode("accb"), (std::vector<uint32_t>{0, 6, 6, 1}));
  EXPECT_EQ(unfused.encode(std::string("a\0b", 3)), (std::vector<uint32_t>{0, 6, 1}));
  tokenizer["model"]["fuse_unk"] = true;
  Tokenizer fused = Tokenizer::load(write("tokenizer.json", tokenizer.dump()));
  EXPECT_EQ(fused.encode("accb"), (std::vector<uint32_t>{0, 6, 1}));
}

TEST_F(TokenizerFiles, LoadsAFolderHoldingTokenizerJson) {
  write("tokenizer.json", tiny(json::array({"a b"})).dump());
  EXPECT_EQ(Tokenizer::load(dir_).encode("ab"), (std::vector<uint32_t>{2}));
}

TEST_F(TokenizerFiles, StringMergesGiveTheSameIdsAsPairMerges) {
  // The Qwen3 file writes merges as pairs; rewrite them as "left right".
  std::ifstream in(testing::fixtures_dir() / "qwen3" / "tokenizer.json");
  json qwen3 = json::parse(in);
  json merges = json::array();
  for (const auto& pair : qwen3["model"]["merges"]) {
    merges.push_back(pair[0].get<std::string>() + " " + pair[1].get<std::string>());
  }
  qwen3["model"]["merges"] = merges;
  Tokenizer rewritten = Tokenizer::load(write("tokenizer.json", qwen3.dump()));
  const Tokenizer& original = testing::reference_tokenizer("qwen3");
  for (std::string text :
       {"Hello, world! It's 2026.", "def f(x):\n    return x\n", "你好，世界 café"}) {
    EXPECT_EQ(rewritten.encode(text), original.encode(text)) << text;
  }
}

TEST_F(TokenizerFiles, DecodingAnUnknownIdIsAnError) {
  Tokenizer tokenizer = Tokenizer::load(write("tokenizer.json", tiny(json::array({"a b"})).dump()));
  EXPECT_THROW(tokenizer.decode(std::vector<uint32_t>{99}), Error);
}

TEST_F(TokenizerFiles, TruncatedJsonNamesTheFile) {
  fs::path file = write("tokenizer.json", tiny(json::array({"a b"})).dump().substr(0, 60));
  std::string message = load_error(file);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
}

TEST_F(TokenizerFiles, MissingModelNamesTheField) {
  json broken = tiny(json::array({"a b"}));
  broken.erase("model");
  fs::path file = write("tokenizer.json", broken.dump());
  std::string message = load_error(file);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("field \"model\": missing"), std::string::npos) << message;
}

TEST_F(TokenizerFiles, UnknownPreTokenizerTypeNamesTheField) {
  json broken = tiny(json::array({"a b"}));
  broken["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Whitespace"}}}}};
  fs::path file = write("tokenizer.json", broken.dump());
  std::string message = load_error(file);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("pre_tokenizer.pretokenizers[0].type"), std::string::npos) << message;
  EXPECT_NE(message.find("Whitespace"), std::string::npos) << message;
}

// Two ByteLevel steps map the bytes twice in Hugging Face tokenizers (its
// ids differ); taken as one, they encoded other ids silently.
TEST_F(TokenizerFiles, ASecondByteLevelIsRefused) {
  json broken = tiny(json::array({"a b"}));
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  broken["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {byte_level, byte_level}}};
  EXPECT_MENTIONS(load_error(write("tokenizer.json", broken.dump())),
                  "field \"pre_tokenizer.pretokenizers[1]\": a second ByteLevel pre-tokenizer");
}

TEST_F(TokenizerFiles, UnknownSplitPatternNamesTheField) {
  json broken = tiny(json::array({"a b"}));
  broken["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", "\\w+|[^\\w\\s]+"}}}, {"behavior", "Isolated"}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  fs::path file = write("tokenizer.json", broken.dump());
  std::string message = load_error(file);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("pre_tokenizer.pretokenizers[0].pattern.Regex"), std::string::npos)
      << message;
  EXPECT_NE(message.find("unknown pre-tokenizer pattern"), std::string::npos) << message;
}

TEST_F(TokenizerFiles, MergeNamingAnUnknownTokenNamesTheMerge) {
  fs::path file = write("tokenizer.json", tiny(json::array({"a b", "a cd"})).dump());
  std::string message = load_error(file);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("model.merges[1]"), std::string::npos) << message;
  EXPECT_NE(message.find("\"cd\""), std::string::npos) << message;
}

TEST_F(TokenizerFiles, MalformedMergeNamesTheMerge) {
  for (json merge : {json("ab"), json("a b c"), json(7), json::array({"a"})}) {
    std::string message = load_error(write("tokenizer.json", tiny(json::array({merge})).dump()));
    EXPECT_NE(message.find("model.merges[0]"), std::string::npos) << message;
  }
}

TEST_F(TokenizerFiles, WrongTypesNameTheField) {
  json broken = tiny(json::array({"a b"}));
  broken["model"]["vocab"]["b"] = "one";
  EXPECT_NE(load_error(write("tokenizer.json", broken.dump())).find("model.vocab.b"),
            std::string::npos);
  broken = tiny(json::array({"a b"}));
  broken["added_tokens"][0].erase("id");
  EXPECT_NE(load_error(write("tokenizer.json", broken.dump())).find("added_tokens[0].id"),
            std::string::npos);
  broken = tiny(json::array({"a b"}));
  broken["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(load_error(write("tokenizer.json", broken.dump())).find("normalizer.type"),
            std::string::npos);
  broken = tiny(json::array({"a b"}));
  broken["model"]["type"] = "WordPiece";
  EXPECT_NE(load_error(write("tokenizer.json", broken.dump())).find("model.type"),
            std::string::npos);
  // Without a ByteLevel pre-tokenizer the vocabulary is read as
  // SentencePiece-style (characters), and this one, with neither <unk> nor
  // byte fallback, would drop characters.
  broken = tiny(json::array({"a b"}));
  broken["pre_tokenizer"] = nullptr;
  std::string message = load_error(write("tokenizer.json", broken.dump()));
  EXPECT_NE(message.find("\"model\""), std::string::npos) << message;
  EXPECT_NE(message.find("no ByteLevel pre-tokenizer"), std::string::npos) << message;
}

// An added token's id must be its own. Hugging Face tokenizers does not
// take such an id as written (it gives a free id, or the vocab's, with a
// warning); taken, two tokens shared one id and "d" decoded as "<pad>".
TEST_F(TokenizerFiles, AnAddedTokenWhoseIdIsTakenIsRefused) {
  const auto adding = [](json token) {
    json t = tiny(json::array({"a b"}));
    t["added_tokens"].push_back(std::move(token));
    return t.dump();
  };
  const auto added = [](int id, const char* content) {
    return json{{"id", id}, {"content", content}, {"special", true}, {"normalized", false}};
  };
  EXPECT_MENTIONS(load_error(write("tokenizer.json", adding(added(0, "<pad>")))),
                  "field \"added_tokens[1].id\": 0 is already \"a\" in model.vocab; '<pad>' "
                  "needs an id of its own");
  EXPECT_MENTIONS(load_error(write("tokenizer.json", adding(added(7, "ab")))),
                  "field \"added_tokens[1].id\": 7, but model.vocab has 'ab' as 2");
  EXPECT_MENTIONS(load_error(write("tokenizer.json", adding(added(5, "<|other|>")))),
                  "field \"added_tokens[1].id\": 5 is also added_tokens[0]'s id, '<|end|>'");
  EXPECT_MENTIONS(load_error(write("tokenizer.json", adding(added(6, "<|end|>")))),
                  "field \"added_tokens[1].id\": 6, but added_tokens[0] adds '<|end|>' as 5");
  // A vocab entry added under its own id (GPT-2's <|endoftext|>) loads, and
  // so does an entry listed twice alike.
  EXPECT_NO_THROW(Tokenizer::load(write("tokenizer.json", adding(added(2, "ab")))));
  EXPECT_NO_THROW(Tokenizer::load(write("tokenizer.json", adding(added(5, "<|end|>")))));
}

// Hugging Face tokenizers numbers the added tokens the vocab lacks itself,
// after the vocab and each other in order, whatever the file says (checked
// in tokenizers 0.23: a file's 430 after a vocab of 425 ids loads as 426);
// a file saying otherwise is refused. Vocab ids with holes are taken as
// written (tiny()'s, above).
TEST_F(TokenizerFiles, AddedTokensAreNumberedAsHuggingFaceNumbersThem) {
  json t = tiny(json::array({"a b"}));
  json vocab = {{"a", 0}, {"b", 1}, {"ab", 2}, {"\u0120", 3}, {"\u0120ab", 4}};
  uint32_t next = 5;
  for (const auto& [token, id] : t["model"]["vocab"].items())
    if (!vocab.contains(token)) vocab[token] = next++;
  t["model"]["vocab"] = vocab;  // ids 0 .. next-1, no holes
  const auto with_end_at = [&](uint32_t id) {
    json file = t;
    file["added_tokens"][0]["id"] = id;
    return file.dump();
  };
  EXPECT_MENTIONS(load_error(write("tokenizer.json", with_end_at(next + 2))),
                  "field \"added_tokens[0].id\": " + std::to_string(next + 2) +
                      ", but Hugging Face tokenizers numbers the tokens the vocab lacks after it "
                      "and each other, in order, whatever the file says: '<|end|>' is " +
                      std::to_string(next) + " there");
  const Tokenizer loaded = Tokenizer::load(write("tokenizer.json", with_end_at(next)));
  EXPECT_EQ(loaded.token_to_id("<|end|>"), next);
}

TEST_F(TokenizerFiles, Gpt2PairErrorsNameTheFileAndLine) {
  write("encoder.json", R"({"a": 0, "b": 1, "ab": 2})");
  write("vocab.bpe", "#version: 0.2\na b\nab\n");
  std::string message = load_error(dir_);
  EXPECT_NE(message.find((dir_ / "vocab.bpe").string() + ": line 3"), std::string::npos) << message;

  write("vocab.bpe", "#version: 0.2\na x\n");
  message = load_error(dir_);
  EXPECT_NE(message.find("vocab.bpe"), std::string::npos) << message;
  EXPECT_NE(message.find("\"x\""), std::string::npos) << message;

  write("encoder.json", R"(["a", "b"])");
  message = load_error(dir_);
  EXPECT_NE(message.find("encoder.json"), std::string::npos) << message;
}

TEST_F(TokenizerFiles, MissingFilesAreErrors) {
  EXPECT_NE(load_error(dir_ / "nope.json").find("no such file"), std::string::npos);
  EXPECT_NE(load_error(dir_).find("holds no tokenizer.json, encoder.json + vocab.bpe (or "
                                  "vocab.json + merges.txt of GPT2Tokenizer), or tokenizer.model"),
            std::string::npos);
}

// A folder transformers' slow GPT-2 tokenizer saved: encoder.json and
// vocab.bpe under Hugging Face's names, vocab.json and merges.txt, read
// as GPT-2's when tokenizer_config.json says GPT2Tokenizer; under another
// class (Qwen2's pre-tokenizer differs) they are refused, naming it.
TEST_F(TokenizerFiles, HuggingFacesNamesOfGpt2sFiles) {
  const fs::path gpt2 = testing::fixtures_dir() / "gpt2";
  fs::copy_file(gpt2 / "encoder.json", dir_ / "vocab.json");
  fs::copy_file(gpt2 / "vocab.bpe", dir_ / "merges.txt");
  write("tokenizer_config.json", R"({"tokenizer_class": "GPT2Tokenizer"})");
  EXPECT_TRUE(Tokenizer::found_at(dir_));
  const Tokenizer renamed = Tokenizer::load(dir_);
  const Tokenizer original = Tokenizer::load(gpt2);
  for (const std::string text : {"Hello world", " 12 + 34 = 46\n", "naïve café <|endoftext|>"})
    EXPECT_EQ(renamed.encode(text), original.encode(text)) << text;

  write("tokenizer_config.json", R"({"tokenizer_class": "Qwen2Tokenizer"})");
  EXPECT_FALSE(Tokenizer::found_at(dir_));
  const std::string message = load_error(dir_);
  EXPECT_NE(message.find("vocab.json + merges.txt and no tokenizer.json; their tokenizer_class "
                         "is Qwen2Tokenizer (tokenizer_config.json)"),
            std::string::npos)
      << message;
  fs::remove(dir_ / "tokenizer_config.json");
  EXPECT_NE(load_error(dir_).find("no tokenizer_config.json names their tokenizer_class"),
            std::string::npos);
}

}  // namespace
}  // namespace lt::data
