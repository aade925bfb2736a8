// data.eval_task math: every train.eval_every steps the run answers the
// held-out prompts greedily and logs eval_accuracy, which must be what
// `lazytrain eval --task math` says of the checkpoint saved at that step.
// The embedded demo is such a run.
#include <gtest/gtest.h>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

// On the demo's own held-out problems (200 two-digit additions) after a
// few steps: the accuracy logged and printed at the end, and the three
// answers printed there, are what `eval --task math` gives for the saved
// checkpoint, row by row. (A model this briefly trained answers few or none
// right, so the answers are compared as well as the accuracy;
// bench/RESULTS.md has the full demo's figures.)
TEST(EvalTask, TheLoggedAccuracyIsWhatEvalSaysOfTheCheckpoint) {
  TempDir tmp("eval_task");
  const fs::path heldout = assets_dir() / "demo" / "addition" / "test.jsonl";
  const fs::path out = tmp / "run";
  std::string output;
  ASSERT_EQ(run_program({"train", "--set", "train.steps=6", "--set", "train.eval_every=3", "--set",
                         "out.dir=" + out.string()},
                        tmp / "train.log", &output, 300),
            0)
      << output;
  const auto metrics = read_metrics(out);
  ASSERT_EQ(metrics.size(), 6u);
  ASSERT_TRUE(metrics[5].contains("eval_accuracy")) << metrics[5].dump();
  EXPECT_NE(output.find("step 3: eval accuracy"), std::string::npos) << output;
  const std::string train_output = output;
  ASSERT_EQ(run_program({"eval", "--task", "math", "--model", (out / "step-6").string(), "--data",
                         heldout.string(), "--max-new-tokens", "8", "--json", "--out",
                         (tmp / "predictions.jsonl").string()},
                        tmp / "eval.log", &output, 300),
            0)
      << output;
  const auto j = nlohmann::json::parse(output.substr(output.rfind("{\"")));
  EXPECT_EQ(j.at("n").get<int64_t>(), 200);
  EXPECT_DOUBLE_EQ(metrics[5].at("eval_accuracy").get<double>(), j.at("accuracy").get<double>());
  // The run's closing lines show the first three held-out rows as eval
  // answered them.
  std::ifstream predictions(tmp / "predictions.jsonl");
  std::string line;
  for (int i = 0; i < 3 && std::getline(predictions, line); ++i) {
    const auto row = nlohmann::json::parse(line);
    std::string prompt = row.at("prompt").get<std::string>();
    while (!prompt.empty() && prompt.back() == '\n') prompt.pop_back();
    const std::string shown = prompt + "\n  -> " + row.at("output").get<std::string>() + "  (" +
                              (row.at("correct").get<bool>() ? "right" : "wrong") +
                              ", the answer is " + row.at("reference").get<std::string>() + ")\n";
    EXPECT_NE(train_output.find(shown), std::string::npos) << shown << "\nnot in:\n"
                                                           << train_output;
  }
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
