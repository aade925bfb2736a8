// Evaluation during training and the loss curve: the eval_loss logged at a
// step equals `lazytrain eval` run on that step's checkpoint (eval is itself
// checked against transformers), and loss.png is a PNG when gnuplot exists.
#include <gtest/gtest.h>

#include <cstdlib>

#include "train/report.h"
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
                      "train.steps=5", "train.save_every=2", "train.keep_last=5"});
  train_quietly(config);
  auto metrics = read_metrics(out);
  // Every second step, and the last (5, not a multiple of 2): the run ends
  // on the figure of the model it saves.
  ASSERT_EQ(metrics.size(), 5u);
  for (int step : {1, 3}) EXPECT_FALSE(metrics[step - 1].contains("eval_loss")) << step;
  for (int step : {2, 4, 5}) {
    ASSERT_TRUE(metrics[step - 1].contains("eval_loss")) << step;
    std::string output;
    const int code =
        run_program({"eval", "--json", "--model", (out / ("step-" + std::to_string(step))).string(),
                     "--data", (tmp / "heldout.jsonl").string()},
                    tmp / "eval.log", &output);
    ASSERT_EQ(code, 0) << output;
    const double expected = nlohmann::json::parse(output).at("loss").get<double>();
    EXPECT_NEAR(metrics[step - 1].at("eval_loss").get<double>(), expected, 1e-6 * expected)
        << "step " << step;
    // --seq-len at least as long as every row changes nothing.
    ASSERT_EQ(run_program({"eval", "--json", "--seq-len", "6", "--model",
                           (out / ("step-" + std::to_string(step))).string(), "--data",
                           (tmp / "heldout.jsonl").string()},
                          tmp / "eval_cut.log", &output),
              0)
        << output;
    EXPECT_NEAR(nlohmann::json::parse(output).at("loss").get<double>(), expected, 1e-6 * expected);
  }
}

// A dataset in a text format: `eval --format` reads it as `train` does
// (GSM8K rows as assets/demo/gsm8k.yaml trains on them, query_response with the plain template, the
// checkpoint's own GPT-2 tokenizer, rows cut at --seq-len), so its loss
// over the held-out rows equals the eval_loss the run logged at that step.
TEST(EvalDuringTraining, EvalOfATextFormatEqualsTheLoggedEvalLoss) {
  TempDir tmp("evaltext");
  const fs::path heldout = fs::path(LT_SOURCE_DIR) / "assets/demo/gsm8k_test_50.jsonl";
  const fs::path out = tmp / "out";
  std::string output;
  ASSERT_EQ(run_program({"train", (assets_dir() / "demo/gsm8k.yaml").string(), "--no-sample",
                         "--set", "out.dir=" + out.string(), "--set", "train.steps=2", "--set",
                         "sched.warmup_steps=0", "--set", "train.eval_every=2", "--set",
                         "train.save_every=2", "--set", "data.eval_path=" + heldout.string()},
                        tmp / "train.log", &output),
            0)
      << output;
  const auto metrics = read_metrics(out);
  ASSERT_EQ(metrics.size(), 2u);
  ASSERT_TRUE(metrics[1].contains("eval_loss"));
  ASSERT_EQ(run_program(
                {"eval", "--json", "--model", (out / "step-2").string(), "--data", heldout.string(),
                 "--format", "query_response", "--template", "plain", "--seq-len", "128"},
                tmp / "eval.log", &output),
            0)
      << output;
  const nlohmann::json got = nlohmann::json::parse(output);
  const double logged = metrics[1].at("eval_loss").get<double>();
  EXPECT_NEAR(got.at("loss").get<double>(), logged, 1e-6 * logged);
  EXPECT_EQ(got.at("rows"), 50);
  // Without a tokenizer where one is looked for, the error says which
  // option chose the folder.
  EXPECT_NE(run_program({"eval", "--model", (out / "step-2").string(), "--data", heldout.string(),
                         "--format", "query_response", "--tokenizer", tmp.path().string()},
                        tmp / "eval2.log", &output),
            0);
  EXPECT_NE(output.find("needs a tokenizer, read from --tokenizer"), std::string::npos) << output;
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

// A folder whose name holds shell and gnuplot syntax is drawn into, and
// runs nothing: the plot went through a shell with the path pasted into
// gnuplot's quotes, so `$(touch ...)` ran (as whoever trained) and a quote
// drew no plot.
TEST(LossCurve, AFolderNameIsNeverRunAsACommand) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)";
  }
  TempDir tmp("plot_names");
  for (const std::string name : {"r$(touch ran)x", "r`touch ran`x", "o'neil", "a\"b"}) {
    const fs::path dir = tmp / name;
    fs::create_directories(dir);
    write_text(dir / "metrics.jsonl", "{\"step\": 0, \"loss\": 2.5}\n{\"step\": 1, \"loss\": 2}\n");
    EXPECT_TRUE(plot_loss_curve(dir / "metrics.jsonl", dir / "loss.png")) << name;
    const std::string png = read_text(dir / "loss.png");
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << name;
    EXPECT_FALSE(fs::exists(dir / ".loss.dat")) << name;
  }
  EXPECT_FALSE(fs::exists("ran"));
  EXPECT_FALSE(fs::exists(tmp / "ran"));
}

// No loss to draw (steps without a trained token, or none): no loss.png,
// rather than the empty file gnuplot leaves.
TEST(LossCurve, NoLossNoPng) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)";
  }
  TempDir tmp("plot_none");
  write_text(tmp / "metrics.jsonl", "{\"step\": 0, \"loss\": null}\n");
  EXPECT_FALSE(plot_loss_curve(tmp / "metrics.jsonl", tmp / "loss.png"));
  EXPECT_FALSE(fs::exists(tmp / "loss.png"));
  write_text(tmp / "metrics.jsonl", "");
  EXPECT_FALSE(plot_loss_curve(tmp / "metrics.jsonl", tmp / "loss.png"));
  EXPECT_FALSE(fs::exists(tmp / "loss.png"));
  EXPECT_FALSE(fs::exists(tmp / ".loss.dat"));
}

// The closing summary against figures worked out by hand: steps 3-6 of a
// run resumed at step 2 (0-based 2..5); the first is left out of the
// medians; the peaks are the largest of every step.
// A sample whose tokens decode to NUL bytes (optim.lr 1e6 blew the
// weights) wrote 40 raw NULs to the terminal: control characters show as
// \xNN, and text of nothing else says so.
TEST(SampleText, ControlCharactersAreShownEscaped) {
  EXPECT_EQ(sample_for_terminal(std::string(3, '\0'), 3),
            "(3 tokens that print as white space or nothing)");
  EXPECT_EQ(sample_for_terminal(" \n\t", 2), "(2 tokens that print as white space or nothing)");
  EXPECT_EQ(sample_for_terminal(std::string("a\0b\x1b[2Jc\x7f", 9) + "\n\td", 6),
            "a\\x00b\\x1b[2Jc\\x7f\n\td");
  EXPECT_EQ(sample_for_terminal("caf\xc3\xa9", 2), "caf\xc3\xa9");
}

TEST(RunSummary, MediansAfterTheFirstStepAndPeaksOverAll) {
  const auto step = [](int64_t i, double tps, double tflops, double s, int64_t cpu) {
    return nlohmann::json{{"step", i},
                          {"tokens_per_s", tps},
                          {"tflops", tflops},
                          {"step_s", s},
                          {"peak_bytes", {{"cpu", cpu}}}};
  };
  std::vector<nlohmann::json> lines = {
      step(2, 10, 1.0, 9.0, 5'000'000'000), step(3, 400, 4.0, 0.5, 1'000'000'000),
      step(4, 100, 2.0, 2.0, 2'000'000'000), step(5, 200, 3.0, 1.0, 1'500'000'000)};
  // Steps 4-6: tokens/s {400, 100, 200} -> 200; TFLOP/s {4, 2, 3} -> 3;
  // seconds {0.5, 2, 1} -> 1; cpu peak 5 GB (step 3).
  EXPECT_EQ(run_summary(lines),
            "summary: 4 steps; median of steps 4-6: 200 tokens/s, 3 TFLOP/s, 1.000 s a step; "
            "peak memory: cpu 5.00 GB");
  // An even count takes the mean of the middle two; a prediction is named.
  lines.push_back(step(6, 300, 5.0, 1.5, 0));
  lines.back()["predicted_step_s"] = 1.25;
  EXPECT_EQ(run_summary(lines),
            "summary: 5 steps; median of steps 4-7: 250 tokens/s, 3.5 TFLOP/s, 1.250 s a step "
            "(predicted 1.250 s); peak memory: cpu 5.00 GB");
  // A plan's GPU peak is named beside the device's.
  nlohmann::json planned = step(7, 300, 5.0, 1.5, 0);
  planned["peak_bytes"]["gpu"] = 2'340'000'000;
  planned["predicted_gpu_peak_bytes"] = 2'500'000'000;
  EXPECT_EQ(run_summary({planned}),
            "summary: 1 step; median of step 8: 300 tokens/s, 5 TFLOP/s, 1.500 s a step; "
            "peak memory: cpu 0 bytes gpu 2.34 GB (planned 2.50 GB)");
  // The streaming executor's CPU update rate, its median over the steps
  // that have one.
  std::vector<nlohmann::json> streamed = {step(0, 300, 5.0, 1.5, 0), step(1, 300, 5.0, 1.5, 0),
                                          step(2, 300, 5.0, 1.5, 0), step(3, 300, 5.0, 1.5, 0)};
  streamed[1]["cpu_update_gparams_per_s"] = 4.5;
  streamed[2]["cpu_update_gparams_per_s"] = 3.0;
  streamed[3]["cpu_update_gparams_per_s"] = 4.0;
  EXPECT_EQ(run_summary(streamed),
            "summary: 4 steps; median of steps 2-4: 300 tokens/s, 5 TFLOP/s, 1.500 s a step; "
            "CPU updates at 4.00 G params/s; peak memory: cpu 0 bytes");
  EXPECT_EQ(run_summary({}), "");
  // One step: its own figures; a skipped step is counted; no peaks, none named.
  nlohmann::json only = {
      {"step", 0}, {"tokens_per_s", 50.0}, {"tflops", 0.25}, {"step_s", 2.0}, {"skipped", true}};
  EXPECT_EQ(run_summary({only}),
            "summary: 1 step; median of step 1: 50 tokens/s, 0.25 TFLOP/s, 2.000 s a step "
            "(1 skipped: no update)");
  // Steps without a trained token (0 tokens/s) are counted apart, not in
  // the medians: of steps 1-5, 2 and 4 have none; the first measured (1) is
  // left out, so the medians are of steps 3 and 5: {100, 300} -> 200.
  std::vector<nlohmann::json> cut = {step(0, 500, 9.0, 0.1, 0), step(1, 0, 0.0, 0.2, 0),
                                     step(2, 100, 1.0, 1.0, 0), step(3, 0, 0.0, 0.2, 0),
                                     step(4, 300, 3.0, 3.0, 0)};
  for (auto& line : cut) line["target_count"] = line.at("tokens_per_s").get<double>() > 0 ? 7 : 0;
  EXPECT_EQ(run_summary(cut),
            "summary: 5 steps (2 without a trained token, left out: nothing computed); median "
            "of the 2 steps with a trained token in 3-5: 200 tokens/s, 2 TFLOP/s, 2.000 s a step; "
            "peak memory: cpu 0 bytes");
  EXPECT_EQ(run_summary({cut[1], cut[3]}),
            "summary: 2 steps (2 without a trained token, left out: nothing computed)");
}

// A real run prints it, and its progress lines carry TFLOP/s.
TEST(RunSummary, TrainPrintsItAndTheProgressLinesShowTflops) {
  TempDir tmp("summary");
  write_random_tokens(tmp / "train.jsonl", 4, 97, 5);
  const fs::path out = tmp / "out";
  fixture_config(fixture("llama"), tmp / "train.jsonl", out);  // 4 steps
  std::string output;
  const int code =
      run_program({"train", "--config", (tmp / "out.yaml").string()}, tmp / "train.log", &output);
  ASSERT_EQ(code, 0) << output;
  EXPECT_NE(output.find("summary: 4 steps; median of steps 2-4: "), std::string::npos) << output;
  EXPECT_NE(output.find(" TFLOP/s | ETA "), std::string::npos) << output;
  EXPECT_EQ(read_metrics(out).size(), 4u);
}

}  // namespace
}  // namespace lt::train::testing
