// Evaluation during training and the loss curve: the eval_loss logged at a
// step equals `lazytrain eval` run on that step's checkpoint (eval is itself
// checked against transformers), and loss.png is a PNG when gnuplot exists.
#include <gtest/gtest.h>

#include <cstdlib>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

TEST(EvalDuringTraining, LoggedEvalLossEqualsEvalOfTheCheckpoint) {
  TempDir tmp("evalrun");
  write_random_tokens(tmp / "train.jsonl", 8, 97, 11);
  // eval rows without labels: every next token is predicted, as `eval` does.
  write_text(tmp / "heldout.jsonl",
             "{\"input_ids\": [5, 9, 13, 2, 40, 41]}\n{\"input_ids\": [3, 3, 4, 90, 1]}\n"
             "{\"input_ids\": [7, 8]}\n");
  const fs::path out = tmp / "out";
  TrainConfig config =
      fixture_config(fixture("qwen3"), tmp / "train.jsonl", out,
                     {"data.eval_path=" + (tmp / "heldout.jsonl").string(), "train.eval_every=2",
                      "train.steps=4", "train.save_every=2", "train.keep_last=5"});
  train_quietly(config);
  auto metrics = read_metrics(out);
  ASSERT_EQ(metrics.size(), 4u);
  EXPECT_FALSE(metrics[0].contains("eval_loss"));
  ASSERT_TRUE(metrics[1].contains("eval_loss"));
  ASSERT_TRUE(metrics[3].contains("eval_loss"));
  for (int step : {2, 4}) {
    std::string output;
    const int code =
        run_program({"eval", "--json", "--model", (out / ("step-" + std::to_string(step))).string(),
                     "--data", (tmp / "heldout.jsonl").string()},
                    tmp / "eval.log", &output);
    ASSERT_EQ(code, 0) << output;
    const double expected = nlohmann::json::parse(output).at("loss").get<double>();
    EXPECT_NEAR(metrics[step - 1].at("eval_loss").get<double>(), expected, 1e-6 * expected)
        << "step " << step;
  }
}

TEST(LossCurve, IsAPngWhenGnuplotIsInstalled) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)";
  }
  TempDir tmp("plot");
  write_random_tokens(tmp / "train.jsonl", 4, 97, 5);
  const fs::path out = tmp / "out";
  train_quietly(fixture_config(fixture("llama"), tmp / "train.jsonl", out, {"train.steps=3"}));
  const std::string png = read_text(out / "loss.png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

}  // namespace
}  // namespace lt::train::testing
