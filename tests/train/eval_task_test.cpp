// data.eval_task math: every train.eval_every steps the run answers the
// held-out prompts greedily and logs eval_accuracy, which must be what
// `lazytrain eval --task math` says of the checkpoint saved at that step.
#include <gtest/gtest.h>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

TEST(EvalTask, TheLoggedAccuracyIsWhatEvalSaysOfTheCheckpoint) {
  TempDir tmp("eval_task");
  // Six GSM8K rows of the demo's corpus as the held-out set.
  const std::string corpus = read_text(assets_dir() / "demo" / "gsm8k_train_2000.jsonl");
  std::string rows;
  size_t at = 0;
  for (int i = 0; i < 6; ++i) {
    const size_t end = corpus.find('\n', at);
    rows += corpus.substr(at, end - at + 1);
    at = end + 1;
  }
  write_text(tmp / "heldout.jsonl", rows);
  const fs::path out = tmp / "run";
  std::string output;
  ASSERT_EQ(run_program({"train", "--no-sample", "--set", "train.steps=2", "--set",
                         "train.seq_len=64", "--set", "train.eval_every=2", "--set",
                         "data.eval_path=" + (tmp / "heldout.jsonl").string(), "--set",
                         "data.eval_task=math", "--set", "data.eval_max_new_tokens=6", "--set",
                         "out.dir=" + out.string()},
                        tmp / "train.log", &output, 300),
            0)
      << output;
  const auto metrics = read_metrics(out);
  ASSERT_EQ(metrics.size(), 2u);
  ASSERT_TRUE(metrics[1].contains("eval_accuracy")) << metrics[1].dump();
  EXPECT_NE(output.find("eval accuracy"), std::string::npos) << output;
  ASSERT_EQ(run_program({"eval", "--task", "math", "--model", (out / "step-2").string(), "--data",
                         (tmp / "heldout.jsonl").string(), "--max-new-tokens", "6", "--json"},
                        tmp / "eval.log", &output, 300),
            0)
      << output;
  const auto j = nlohmann::json::parse(output.substr(output.rfind("{\"")));
  EXPECT_EQ(j.at("n").get<int64_t>(), 6);
  EXPECT_DOUBLE_EQ(metrics[1].at("eval_accuracy").get<double>(), j.at("accuracy").get<double>());
}

TEST(EvalTask, BadKeysAreRefusedByName) {
  TempDir tmp("eval_task_keys");
  write_random_tokens(tmp / "data.jsonl", 4, 97, 1);
  const auto error_of = [&](const std::vector<std::string>& overrides) -> std::string {
    try {
      fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "out", overrides);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of({"data.eval_task=poetry"}).find("data.eval_task"), std::string::npos);
  EXPECT_NE(error_of({"data.eval_task=math"}).find("needs 'data.eval_path'"), std::string::npos);
  EXPECT_NE(error_of({"data.eval_task=math", "data.eval_path=" + (tmp / "data.jsonl").string()})
                .find("not tokens"),
            std::string::npos);
}

}  // namespace
}  // namespace lt::train::testing
