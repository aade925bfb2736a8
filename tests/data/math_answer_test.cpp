// Answer extraction and normalization against a hand-written table of
// tricky cases (tests/data/fixtures/math_answers.json): each expected value
// was worked out from the rules in data/math_answer.h, not taken from the
// code's output.
#include "data/math_answer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

nlohmann::json table() {
  std::ifstream in(testing::fixtures_dir() / "math_answers.json");
  EXPECT_TRUE(in.good()) << "cannot open math_answers.json";
  return nlohmann::json::parse(in);
}

TEST(MathAnswer, TableOfCases) {
  const nlohmann::json t = table();
  const auto& cases = t.at("cases");
  ASSERT_GE(cases.size(), 40u);
  for (const auto& c : cases) {
    const std::string text = c.at("text");
    const std::string kind = c.at("kind");
    const std::string got = kind == "output" ? predicted_answer(text) : reference_answer(text);
    EXPECT_EQ(got, c.at("expected").get<std::string>())
        << kind << " text: " << testing::escaped(text);
  }
}

TEST(MathAnswer, EquivalentAnswersMatch) {
  const nlohmann::json t = table();
  for (const auto& pair : t.at("equal")) {
    const std::string a = pair.at(0), b = pair.at(1);
    EXPECT_TRUE(answers_match(normalize_answer(a), normalize_answer(b)))
        << a << " vs " << b << ": " << normalize_answer(a) << " vs " << normalize_answer(b);
  }
  for (const auto& pair : t.at("different")) {
    const std::string a = pair.at(0), b = pair.at(1);
    EXPECT_FALSE(answers_match(normalize_answer(a), normalize_answer(b))) << a << " vs " << b;
  }
}

// Every GSM8K reference extracts to the integer after its final "####",
// as the GSM8K convention (and lm-evaluation-harness's "#### (\\-?[0-9.,]+)")
// reads it: also the four train rows whose prose says "the answer is"
// before it, with a calculator note or words after it, which read as
// "8>>8" and "therefore3" when that phrase came first.
void expect_final_numbers(const std::string& path, int expected_rows) {
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    const std::string answer = row.at("answer");
    const std::string tail = answer.substr(answer.rfind("####") + 4);
    std::string digits;
    for (char c : tail) {
      if (c != ',' && c != ' ') digits += c;
    }
    EXPECT_EQ(reference_answer(answer), std::to_string(std::stoll(digits))) << answer;
    ++rows;
  }
  EXPECT_EQ(rows, expected_rows) << path;
}

TEST(MathAnswer, Gsm8kReferencesAreTheirFinalNumbers) {
  expect_final_numbers(std::string(LT_SOURCE_DIR) + "/assets/demo/gsm8k_test_50.jsonl", 50);
  const std::string datasets = (testing::fixtures_dir() / "datasets").string();
  expect_final_numbers(datasets + "/gsm8k_train_head.jsonl", 3);
  expect_final_numbers(datasets + "/gsm8k_answer_is_rows.jsonl", 4);
}

}  // namespace
}  // namespace lt::data
