// Added tokens with single_word match only where no word character touches
// them, with Hugging Face tokenizers' word characters (its Rust regex \w):
// combining marks and joiners are word characters there, superscript digits
// are not. Goldens from tools/reference/make_word_char_ranges.py: the ids HF
// gives for the token beside characters at the edges of its word ranges.
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

TEST(SingleWord, TokensMatchWhereHuggingFaceMatchesThem) {
  std::ifstream goldens_in(testing::fixtures_dir() / "single_word_goldens.json");
  ASSERT_TRUE(goldens_in.good());
  const nlohmann::json goldens = nlohmann::json::parse(goldens_in);
  std::ifstream layout_in(testing::fixtures_dir() / "llama2_style" / "tokenizer.json");
  nlohmann::json layout = nlohmann::json::parse(layout_in);
  layout["added_tokens"].push_back({{"id", goldens.at("token_id")},
                                    {"content", goldens.at("token")},
                                    {"single_word", true},
                                    {"lstrip", false},
                                    {"rstrip", false},
                                    {"normalized", false},
                                    {"special", false}});
  const fs::path dir = fs::temp_directory_path() / ("lt_single_word_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << layout.dump();
  const Tokenizer tokenizer = Tokenizer::from_tokenizer_json(dir / "tokenizer.json");
  fs::remove_all(dir);
  const auto& cases = goldens.at("cases");
  ASSERT_GE(cases.size(), 1000u);
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

}  // namespace
}  // namespace lt::data
