// `lazytrain tokenize --data`: a dataset's rows as training reads them, the
// trained tokens marked. Against transformers: the ids and labels of a
// Qwen3 tool-calling row (fixtures/chat_template_tool_goldens.json, made by
// tools/reference/make_tool_call_goldens.py with transformers 5.25; Qwen3's
// template writes only Qwen3's own tokens, so its ids are the plain Qwen3
// tokenizer's).
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "support/cli_run.h"

namespace lt {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(LT_SOURCE_DIR) / "tests/data/fixtures";

class TokenizeData : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lt_tokenize_data_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ifstream in(kFixtures / "chat_template_tool_goldens.json");
    const nlohmann::ordered_json goldens = nlohmann::ordered_json::parse(in);
    for (const auto& c : goldens.at("cases")) {
      if (c.at("template") == "qwen3/tokenizer_config.json" &&
          c.at("conversation") == "content_beside_a_call") {
        golden_ = c;
      }
    }
    ASSERT_FALSE(golden_.is_null());
    std::ofstream(dir_ / "rows.jsonl") << "not json\n" << golden_.at("row").dump() << "\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  testing::CliResult run(const std::string& args) {
    return testing::run_lazytrain("tokenize --tokenizer " + (kFixtures / "qwen3").string() +
                                      " --data " + (dir_ / "rows.jsonl").string() + " " + args,
                                  dir_ / "stderr.txt");
  }

  fs::path dir_;
  nlohmann::ordered_json golden_;
};

TEST_F(TokenizeData, JsonGivesTheIdsAndLabelsTrainingUses) {
  const testing::CliResult r = run("--json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json row = nlohmann::json::parse(r.out);
  EXPECT_EQ(row.at("line"), 2);
  EXPECT_EQ(row.at("ids"), golden_.at("ids"));
  EXPECT_EQ(row.at("labels"), golden_.at("labels"));
  // The report names the format, the template and the row it skipped.
  EXPECT_NE(r.err.find("1 sample from 2 rows (format sharegpt, template jinja), 1 skipped"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("rows.jsonl:1:"), std::string::npos) << r.err;
}

TEST_F(TokenizeData, TextMarksTheTrainedRuns) {
  const testing::CliResult r = run("--rows 5");
  ASSERT_EQ(r.status, 0) << r.err;
  // Expected: the golden's text with each run of trained tokens (by its
  // labels) between the marks.
  const data::Tokenizer tokenizer = data::Tokenizer::load(kFixtures / "qwen3");
  const auto ids = golden_.at("ids").get<std::vector<uint32_t>>();
  const auto labels = golden_.at("labels").get<std::vector<int32_t>>();
  std::string want;
  for (size_t k = 0; k < ids.size();) {
    const bool trained = labels[k] != -100;
    std::vector<uint32_t> run;
    for (; k < ids.size() && (labels[k] != -100) == trained; ++k) run.push_back(ids[k]);
    want += (trained ? "⟦" : "") + tokenizer.decode(run) + (trained ? "⟧" : "");
  }
  std::string unmarked = want;
  for (const std::string mark : {"⟦", "⟧"}) {
    for (size_t at; (at = unmarked.find(mark)) != std::string::npos;)
      unmarked.erase(at, mark.size());
  }
  ASSERT_EQ(unmarked, golden_.at("text").get<std::string>());
  EXPECT_NE(r.out.find(": " + std::to_string(ids.size()) + " tokens, 35 trained\n" + want + "\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(want.find("⟦Let me check.\n<tool_call>"), std::string::npos) << want;
}

TEST_F(TokenizeData, SaysHowManySkippedRowsItDoesNotList) {
  std::ofstream out(dir_ / "rows.jsonl");
  for (int i = 0; i < 25; ++i) out << "not json\n";
  out << golden_.at("row").dump() << "\n";
  out.close();
  const testing::CliResult r = run("--rows 1 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("1 sample from 26 rows"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  ... and 5 more skipped (the first 20 are listed)"), std::string::npos)
      << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("line"), 26) << r.out;
}

// --seq-len shows a row as train.seq_len cuts it (padded rows, evaluation):
// its first N tokens, with what the cut leaves out, counted against the
// golden's ids and labels.
TEST_F(TokenizeData, SeqLenShowsTheRowAsTheCutLeavesIt) {
  const auto ids = golden_.at("ids").get<std::vector<int64_t>>();
  const auto labels = golden_.at("labels").get<std::vector<int64_t>>();
  const size_t keep = 40;
  ASSERT_GT(ids.size(), keep);
  const auto trained = [&](size_t from, size_t to) {
    return std::count_if(labels.begin() + static_cast<std::ptrdiff_t>(from),
                         labels.begin() + static_cast<std::ptrdiff_t>(to),
                         [](int64_t l) { return l != -100; });
  };
  const auto past = trained(keep, labels.size());
  ASSERT_GT(past, 0);
  testing::CliResult r = run("--seq-len 40 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json row = nlohmann::json::parse(r.out);
  EXPECT_EQ(row.at("ids"), std::vector<int64_t>(ids.begin(), ids.begin() + keep));
  EXPECT_EQ(row.at("labels"), std::vector<int64_t>(labels.begin(), labels.begin() + keep));
  EXPECT_EQ(row.at("tokens_cut"), ids.size() - keep);
  // Within the first 40 a trained target past position 0 keeps the row.
  const bool keeps_one = trained(1, keep) > 0;
  EXPECT_NE(r.err.find(
                "--seq-len 40: 1 of 1 rows longer and cut (" + std::string(keeps_one ? "0" : "1") +
                " keep no trained token, " + std::string(keeps_one ? "1" : "0") +
                " lose part of theirs); the longest has " + std::to_string(ids.size()) + " tokens"),
            std::string::npos)
      << r.err;
  r = run("--seq-len 40");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(": 40 tokens, " + std::to_string(trained(0, keep)) +
                       " trained (cut at --seq-len 40: " + std::to_string(ids.size() - keep) +
                       " more tokens, " + std::to_string(past) + " of them trained, not read)"),
            std::string::npos)
      << r.out;
  r = run("--seq-len 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--seq-len must be at least 1"), std::string::npos) << r.err;
}

// --rows below 1 would show no row: refused, naming the option and the
// value, as generate's and eval's counts are; nothing is printed.
TEST_F(TokenizeData, RowsBelowOneAreRefusedNamingThem) {
  for (const std::string rows : {"0", "-1"}) {
    const testing::CliResult r = run("--rows " + rows);
    EXPECT_NE(r.status, 0) << rows;
    EXPECT_NE(
        r.err.find("error: --rows must be at least 1 (the rows of --data shown); got " + rows),
        std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "") << rows;
  }
}

// The options of --data without --data were ignored: stdin was encoded as it is.
TEST_F(TokenizeData, ItsOptionsWithoutDataAreRefused) {
  for (const std::string option : {"--rows 2", "--format text", "--train-on-prompt"}) {
    const testing::CliResult r = testing::run_lazytrain(
        "tokenize --tokenizer " + (kFixtures / "qwen3").string() + " " + option + " < /dev/null",
        dir_ / "stderr.txt");
    EXPECT_NE(r.status, 0) << option;
    const std::string name = option.substr(0, option.find(' '));
    EXPECT_NE(r.err.find("error: " + name + " shapes how --data's rows are read; without --data"),
              std::string::npos)
        << r.err;
  }
}

}  // namespace
}  // namespace lt
