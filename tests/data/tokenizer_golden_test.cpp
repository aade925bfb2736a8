// lazytrain's tokenizer against ids Hugging Face `tokenizers` gave on a
// varied corpus (tests/data/fixtures/tokenizer_goldens.json, written by
// tools/reference/make_tokenizer_goldens.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "data/unicode.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

using testing::escaped;

const nlohmann::json& goldens() {
  static const nlohmann::json parsed = [] {
    std::ifstream in(testing::fixtures_dir() / "tokenizer_goldens.json");
    return nlohmann::json::parse(in);
  }();
  return parsed;
}

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, EveryIdMatchesHuggingFace) {
  const Tokenizer& tokenizer = testing::reference_tokenizer(GetParam());
  size_t checked = 0;
  for (const auto& golden : goldens()["cases"]) {
    std::string text = golden["text"];
    auto expected = golden[GetParam()]["ids"].get<std::vector<uint32_t>>();
    EXPECT_EQ(tokenizer.encode(text), expected) << "text " << escaped(text);
    ++checked;
  }
  EXPECT_GT(checked, 50u);
}

TEST_P(TokenizerGolden, DecodeMatchesHuggingFaceAndRoundTrips) {
  const Tokenizer& tokenizer = testing::reference_tokenizer(GetParam());
  for (const auto& golden : goldens()["cases"]) {
    std::string text = golden["text"];
    auto ids = golden[GetParam()]["ids"].get<std::vector<uint32_t>>();
    std::string expected_decoded = golden[GetParam()]["decoded"];
    EXPECT_EQ(tokenizer.decode(ids), expected_decoded) << "text " << escaped(text);
    // decode(encode(x)) is x, after the tokenizer's normalization; the
    // RoBERTa-style pre-tokenizer adds a space in front of each segment.
    std::string round_trip = tokenizer.decode(tokenizer.encode(text));
    std::string expected = tokenizer.normalizer().apply(text);
    if (GetParam() != "roberta_style") {
      EXPECT_EQ(round_trip, expected) << "text " << escaped(text);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(References, TokenizerGolden,
                         ::testing::ValuesIn(testing::reference_names()),
                         [](const auto& info) { return info.param; });

TEST(PreTokenizerGolden, PiecesMatchHuggingFaceSplit) {
  for (const auto& golden : goldens()["cases"]) {
    std::string text = golden["text"];
    for (const auto& [pattern, pieces] : golden["pieces"].items()) {
      EXPECT_EQ(testing::split_pieces(testing::pattern_named(pattern), text),
                pieces.get<std::vector<std::string>>())
          << "pattern " << pattern << ", text " << escaped(text);
    }
  }
}

TEST(PreTokenizerGolden, RecognizesThePatternStringsOfTheGoldenFile) {
  for (const auto& [name, regex] : goldens()["patterns"].items()) {
    auto recognized = recognize_split_pattern(regex.get<std::string>());
    ASSERT_TRUE(recognized.has_value()) << name;
    EXPECT_EQ(*recognized, testing::pattern_named(name));
  }
}

}  // namespace
}  // namespace lt::data
