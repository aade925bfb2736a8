// Added tokens against Hugging Face tokenizers' ids for them:
// - single_word tokens match only where no word character touches them,
//   with HF's word characters (its Rust regex \w): combining marks and
//   joiners are word characters there, superscript digits are not
//   (tools/reference/make_word_char_ranges.py: the token beside characters
//   at the edges of HF's word ranges);
// - lstrip/rstrip tokens strip around matches found in the raw text, so a
//   token starting inside another's stripped whitespace is still emitted
//   (tools/reference/make_added_token_overlap_goldens.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_goldens(const std::string& name) {
  std::ifstream in(testing::fixtures_dir() / name);
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in);
}

// The llama2_style fixture with `added` appended to its added tokens.
Tokenizer fixture_with(const nlohmann::json& added) {
  std::ifstream layout_in(testing::fixtures_dir() / "llama2_style" / "tokenizer.json");
  nlohmann::json layout = nlohmann::json::parse(layout_in);
  for (const auto& token : added) layout["added_tokens"].push_back(token);
  const fs::path dir = fs::temp_directory_path() / ("lt_added_tokens_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << layout.dump();
  Tokenizer tokenizer = Tokenizer::from_tokenizer_json(dir / "tokenizer.json");
  fs::remove_all(dir);
  return tokenizer;
}

// Each case's ids against HF's; the first ten that differ are shown.
void expect_goldens(const Tokenizer& tokenizer, const nlohmann::json& cases) {
  int wrong = 0;
  for (const auto& c : cases) {
    const std::string text = c.at(0);
    const std::vector<uint32_t> want = c.at(1).get<std::vector<uint32_t>>();
    const std::vector<uint32_t> got = tokenizer.encode(text);
    if (got != want && ++wrong <= 10)
      ADD_FAILURE() << "text " << testing::escaped(text) << ": " << ::testing::PrintToString(got)
                    << ", Hugging Face " << ::testing::PrintToString(want);
  }
  EXPECT_EQ(wrong, 0);
}

TEST(SingleWord, TokensMatchWhereHuggingFaceMatchesThem) {
  const nlohmann::json goldens = read_goldens("single_word_goldens.json");
  const Tokenizer tokenizer = fixture_with(nlohmann::json::array({{{"id", goldens.at("token_id")},
                                                                   {"content", goldens.at("token")},
                                                                   {"single_word", true},
                                                                   {"lstrip", false},
                                                                   {"rstrip", false},
                                                                   {"normalized", false},
                                                                   {"special", false}}}));
  ASSERT_GE(goldens.at("cases").size(), 1000u);
  expect_goldens(tokenizer, goldens.at("cases"));
}

TEST(StrippedAddedTokens, ATokenInsideAnotherTokensStripIsStillEmitted) {
  const nlohmann::json goldens = read_goldens("added_token_overlap_goldens.json");
  ASSERT_GE(goldens.at("cases").size(), 10u);
  expect_goldens(fixture_with(goldens.at("added_tokens")), goldens.at("cases"));
}

}  // namespace
}  // namespace lt::data
