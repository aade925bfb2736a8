// SentencePiece-style tokenizers against Hugging Face `tokenizers` and the
// `sentencepiece` library: ids and decoded text on a varied corpus, and the
// decoding of random id sequences (tests/data/fixtures/sentencepiece_goldens.json,
// written by tools/reference/make_sentencepiece_goldens.py). Then the
// errors a malformed or unsupported file gets.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::escaped;

const json& goldens() {
  static const json parsed = [] {
    std::ifstream in(testing::fixtures_dir() / "sentencepiece_goldens.json");
    return json::parse(in);
  }();
  return parsed;
}

TEST(SentencePieceGoldens, CoverEveryVariant) {
  auto names = goldens()["variants"].get<std::vector<std::string>>();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, testing::sentencepiece_style_names());  // variants.json's, sorted
  EXPECT_GE(goldens()["cases"].size(), 80u);
}

class SentencePieceStyle : public ::testing::TestWithParam<std::string> {};

TEST_P(SentencePieceStyle, EveryIdMatchesHuggingFace) {
  const Tokenizer& tokenizer = testing::sentencepiece_style_tokenizer(GetParam());
  for (const auto& golden : goldens()["cases"]) {
    const std::string text = golden["text"];
    EXPECT_EQ(tokenizer.encode(text), golden[GetParam()]["ids"].get<std::vector<uint32_t>>())
        << "text " << escaped(text);
  }
}

TEST_P(SentencePieceStyle, DecodeMatchesHuggingFace) {
  const Tokenizer& tokenizer = testing::sentencepiece_style_tokenizer(GetParam());
  for (const auto& golden : goldens()["cases"]) {
    const auto& expected = golden[GetParam()]["decoded"];
    if (expected.is_null()) continue;  // HF's Strip decoder panicked
    auto ids = golden[GetParam()]["ids"].get<std::vector<uint32_t>>();
    EXPECT_EQ(tokenizer.decode(ids), expected.get<std::string>())
        << "text " << escaped(golden["text"]);
  }
  for (const auto& golden : goldens()["decode_cases"]) {
    auto ids = golden["ids"].get<std::vector<uint32_t>>();
    const auto& expected = golden[GetParam()];
    for (bool skip : {false, true}) {
      if (expected[skip ? 1 : 0].is_null()) continue;
      EXPECT_EQ(tokenizer.decode(ids, skip), expected[skip ? 1 : 0].get<std::string>())
          << "ids " << golden["ids"].dump() << (skip ? ", skipping special tokens" : "");
    }
  }
}

// decode_bytes is the bytes token by token, each as in the middle of a text:
// joining the pieces' gives the whole's, and only the text's ends (the
// space Strip or Metaspace drops) and invalid UTF-8 differ from decode.
TEST_P(SentencePieceStyle, DecodeBytesAddUpTokenByToken) {
  const Tokenizer& tokenizer = testing::sentencepiece_style_tokenizer(GetParam());
  for (const auto& golden : goldens()["cases"]) {
    auto ids = golden[GetParam()]["ids"].get<std::vector<uint32_t>>();
    std::string joined;
    for (uint32_t id : ids) joined += tokenizer.decode_bytes({&id, 1});
    EXPECT_EQ(tokenizer.decode_bytes(ids), joined);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, SentencePieceStyle,
                         ::testing::ValuesIn(testing::sentencepiece_style_names()),
                         [](const auto& info) { return info.param; });

TEST(SentencePieceStyle, HandWorkedLlama2Cases) {
  const Tokenizer& llama2 = testing::sentencepiece_style_tokenizer("llama2_style");
  // The normalizer writes "▁Hello▁world"; the decoder's Strip takes the
  // leading space off the text, but not off a token in the middle.
  const std::vector<uint32_t> ids = llama2.encode("Hello world");
  EXPECT_EQ(llama2.decode(ids), "Hello world");
  EXPECT_EQ(llama2.decode_bytes(ids), " Hello world");
  // Byte fallback: U+1F600 is four <0xXX> tokens, decoded back to one
  // character, or one U+FFFD per byte when cut short.
  const std::vector<uint32_t> emoji = llama2.encode("\U0001F600");
  ASSERT_EQ(emoji.size(), 5u);  // "▁" and four bytes
  EXPECT_EQ(llama2.id_to_token(emoji[1]), "<0xF0>");
  EXPECT_EQ(llama2.decode(emoji), "\U0001F600");
  EXPECT_EQ(llama2.decode(std::vector<uint32_t>(emoji.begin(), emoji.end() - 1)),
            "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(llama2.decode_bytes(emoji), " \xF0\x9F\x98\x80");
  // Special tokens are cut out before the normalizer, which then puts
  // "▁" in front of what follows each.
  EXPECT_EQ(llama2.encode("<s>Hi"),
            (std::vector<uint32_t>{*llama2.token_to_id("<s>"), *llama2.token_to_id("\u2581H"),
                                   *llama2.token_to_id("i")}));
}

TEST(LiteralSplit, PiecesMatchHuggingFaceSplit) {
  const auto texts = goldens()["literal_split"]["texts"].get<std::vector<std::string>>();
  for (const auto& golden : goldens()["literal_split"]["cases"]) {
    const json settings = {{"behavior", golden["behavior"]}};
    const LiteralSplit split =
        LiteralSplit::from_json(settings, JsonField{"test", "split"}, golden["delimiter"]);
    for (size_t i = 0; i < texts.size(); ++i) {
      std::vector<std::string_view> pieces;
      split.split(texts[i], pieces);
      EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()),
                golden["pieces"][i].get<std::vector<std::string>>())
          << golden["behavior"] << " on \"" << golden["delimiter"].get<std::string>() << "\", text "
          << escaped(texts[i]);
    }
  }
}

// Any bytes, invalid UTF-8 included, encode and come back: under byte
// fallback a byte outside the vocabulary is its <0xXX> token, and Llama 2's
// Prepend puts one "▁" (a space) in front. The strings avoid what would
// not come back as itself: "▁" written in the text and added tokens ('<',
// '[', 0xE2 never appear).
TEST(SentencePieceStyle, RandomBytesRoundTripThroughByteFallback) {
  const Tokenizer& llama2 = testing::sentencepiece_style_tokenizer("llama2_style");
  const Tokenizer& unk = testing::sentencepiece_style_tokenizer("unk_fused");
  std::mt19937 rng(28);
  for (int i = 0; i < 300; ++i) {
    std::string text;
    const int length = std::uniform_int_distribution<int>(1, 40)(rng);
    while (static_cast<int>(text.size()) < length) {
      const auto byte = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
      if (byte != '<' && byte != '[' && byte != '\xE2') text += byte;
    }
    EXPECT_EQ(llama2.decode_bytes(llama2.encode(text)), " " + text) << escaped(text);
    unk.decode(unk.encode(text));  // <unk> stands in; nothing throws
  }
}

// The tokenizer.model fixture, run by libsentencepiece, against the
// `sentencepiece` Python package.
class SentencePieceModelFile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!SentencePieceModel::available()) GTEST_SKIP() << "built without libsentencepiece";
  }
  static const Tokenizer& tokenizer() {
    static const Tokenizer loaded =
        Tokenizer::load(testing::fixtures_dir() / "sentencepiece_model");
    return loaded;
  }
};

TEST_F(SentencePieceModelFile, EveryIdAndTextMatchesSentencePiece) {
  for (const auto& golden : goldens()["sentencepiece_cases"]) {
    const std::string text = golden["text"];
    const auto ids = tokenizer().encode(text);
    EXPECT_EQ(ids, golden["ids"].get<std::vector<uint32_t>>()) << "text " << escaped(text);
    EXPECT_EQ(tokenizer().decode(ids), golden["decoded"].get<std::string>())
        << "text " << escaped(text);
  }
  for (const auto& golden : goldens()["sentencepiece_decode_cases"]) {
    EXPECT_EQ(tokenizer().decode(golden["ids"].get<std::vector<uint32_t>>()),
              golden["decoded"].get<std::string>())
        << "ids " << golden["ids"].dump();
  }
}

TEST_F(SentencePieceModelFile, PiecesAndIdsMatchSentencePiece) {
  const auto pieces = goldens()["sentencepiece_pieces"].get<std::vector<std::string>>();
  ASSERT_EQ(tokenizer().vocab_size(), pieces.size());
  for (uint32_t id = 0; id < pieces.size(); ++id) {
    EXPECT_EQ(tokenizer().id_to_token(id), pieces[id]);
    EXPECT_EQ(tokenizer().token_to_id(pieces[id]), id) << pieces[id];
  }
  EXPECT_EQ(tokenizer().token_to_id("no such piece"), std::nullopt);
  EXPECT_THROW(tokenizer().decode(std::vector<uint32_t>{static_cast<uint32_t>(pieces.size())}),
               Error);
  // Control tokens decode to nothing; "▁" is a space in the middle of a text.
  const uint32_t bos = *tokenizer().token_to_id("<s>");
  const std::vector<uint32_t> ids = tokenizer().encode("Hello world");
  EXPECT_EQ(tokenizer().decode_bytes({&bos, 1}), "");
  EXPECT_EQ(tokenizer().decode_bytes(ids), " Hello world");
}

// A folder's tokenizer.json is read before its tokenizer.model, as
// transformers' fast tokenizer would; a .model file can be named directly.
TEST_F(SentencePieceModelFile, FolderPrefersTokenizerJson) {
  const fs::path dir =
      fs::temp_directory_path() / ("lazytrain_sp_folder_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path fixtures = testing::fixtures_dir();
  fs::copy_file(fixtures / "sentencepiece_model/tokenizer.model", dir / "tokenizer.model");
  const std::string text = "Hello world";
  EXPECT_EQ(Tokenizer::load(dir).encode(text), tokenizer().encode(text));
  EXPECT_EQ(Tokenizer::load(dir / "tokenizer.model").encode(text), tokenizer().encode(text));
  fs::copy_file(fixtures / "llama2_style/tokenizer.json", dir / "tokenizer.json");
  EXPECT_EQ(Tokenizer::load(dir).encode(text),
            testing::sentencepiece_style_tokenizer("llama2_style").encode(text));
  fs::remove_all(dir);
}

TEST_F(SentencePieceModelFile, GarbageModelNamesTheFile) {
  const fs::path file =
      fs::temp_directory_path() / ("lazytrain_bad_" + std::to_string(getpid()) + ".model");
  std::ofstream(file) << "not a protobuf";
  try {
    Tokenizer::load(file);
    ADD_FAILURE() << "loaded a garbage .model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
  fs::remove(file);
}

// Bad files: each error names the file and the JSON field path.
class SentencePieceStyleErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(testing::fixtures_dir() / "llama2_style/tokenizer.json");
    base_ = json::parse(in);
    file_ =
        fs::temp_directory_path() / ("lazytrain_sp_errors_" + std::to_string(getpid()) + ".json");
  }
  void TearDown() override { fs::remove(file_); }

  // The error loading `tokenizer`, which must name the file and `field`.
  std::string error_of(const json& tokenizer, const std::string& field) {
    std::ofstream(file_) << tokenizer.dump();
    try {
      Tokenizer::load(file_);
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(file_.string()), std::string::npos) << message;
      EXPECT_NE(message.find("\"" + field + "\""), std::string::npos) << message;
      return message;
    }
    ADD_FAILURE() << "loaded; expected an error naming " << field;
    return "";
  }

  json base_;
  fs::path file_;
};

TEST_F(SentencePieceStyleErrors, UnsupportedTypesNameTheField) {
  json broken = base_;
  broken["normalizer"]["normalizers"][1] = {{"type", "Lowercase"}};
  EXPECT_NE(error_of(broken, "normalizer.normalizers[1].type").find("Lowercase"),
            std::string::npos);
  broken = base_;
  broken["decoder"]["decoders"][2] = {{"type", "WordPiece"}};
  error_of(broken, "decoder.decoders[2].type");
  broken = base_;
  broken["pre_tokenizer"] = {{"type", "Whitespace"}};
  error_of(broken, "pre_tokenizer.type");
  broken = base_;
  broken["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}};
  error_of(broken, "normalizer.normalizers[1].pattern");
  broken = base_;
  broken["decoder"]["decoders"][0]["pattern"] = {{"Regex", "\u2581"}};
  error_of(broken, "decoder.decoders[0].pattern");
}

TEST_F(SentencePieceStyleErrors, MalformedFieldsNameTheField) {
  json broken = base_;
  broken["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "sometimes"}};
  EXPECT_NE(error_of(broken, "pre_tokenizer.prepend_scheme").find("sometimes"), std::string::npos);
  broken["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}};
  error_of(broken, "pre_tokenizer.replacement");
  broken["pre_tokenizer"] = {{"type", "Metaspace"}, {"split", "yes"}, {"replacement", "_"}};
  error_of(broken, "pre_tokenizer.split");
  broken["pre_tokenizer"] = {{"type", "Metaspace"}};
  error_of(broken, "pre_tokenizer.replacement");
  broken = base_;
  broken["decoder"]["decoders"][3]["start"] = -1;
  error_of(broken, "decoder.decoders[3].start");
  broken["decoder"]["decoders"][3] = {
      {"type", "Strip"}, {"content", "  "}, {"start", 1}, {"stop", 0}};
  error_of(broken, "decoder.decoders[3].content");
  broken = base_;
  broken["normalizer"]["normalizers"][0].erase("prepend");
  error_of(broken, "normalizer.normalizers[0].prepend");
  broken = base_;
  broken["normalizer"]["normalizers"][1]["pattern"] = {{"String", ""}};
  error_of(broken, "normalizer.normalizers[1].pattern.String");
  broken = base_;
  broken["decoder"]["decoders"] = "ByteFallback";
  error_of(broken, "decoder.decoders");
  broken = base_;
  broken["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithBoth"}};
  EXPECT_NE(error_of(broken, "pre_tokenizer.behavior").find("MergedWithBoth"), std::string::npos);
  broken["pre_tokenizer"]["behavior"] = "Removed";
  broken["pre_tokenizer"]["invert"] = true;
  error_of(broken, "pre_tokenizer.invert");
  broken["pre_tokenizer"]["invert"] = false;
  broken["pre_tokenizer"]["pattern"] = {{"String", ""}};
  error_of(broken, "pre_tokenizer.pattern.String");
}

TEST_F(SentencePieceStyleErrors, VocabularyThatWouldDropCharactersIsRefused) {
  json broken = base_;
  broken["model"]["unk_token"] = nullptr;
  broken["model"]["byte_fallback"] = false;
  EXPECT_NE(error_of(broken, "model").find("dropped"), std::string::npos);
  broken["model"]["byte_fallback"] = true;
  broken["model"]["vocab"].erase("<0x80>");
  error_of(broken, "model");
  broken = base_;
  broken["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Metaspace"}, {"replacement", "\u2581"}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  EXPECT_NE(error_of(broken, "pre_tokenizer").find("ByteLevel and Metaspace"), std::string::npos);
}

}  // namespace
}  // namespace lt::data
