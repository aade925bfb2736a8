// TensorBoard logs of a run, read back by the `tensorboard` package's own
// reader (tests/train/tensorboard_reader.py, run by the repository's .venv
// python; skipped when it or the package is missing): every number of every
// metrics.jsonl line is a scalar at that step, with the float32 value of
// the line's; after a resume from an earlier checkpoint the reader shows
// each step once, with the resumed run's values, as metrics.jsonl does.
// Also the lines train prints at its start and end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "support/file_size_limit.h"
#include "train/report.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

// The reader's view of `logdir`, or a skip reason in `skip`.
nlohmann::json read_with_tensorboard(const fs::path& logdir, const fs::path& scratch,
                                     std::string* skip) {
  const fs::path python = fs::path(LT_SOURCE_DIR) / ".venv/bin/python";
  if (!fs::exists(python)) {
    *skip = python.string() + " is missing: run scripts/setup-test-venv.sh";
    return {};
  }
  if (std::system((python.string() + " -c 'import tensorboard' 2>/dev/null").c_str()) != 0) {
    *skip = "the `tensorboard` package is not in .venv: run scripts/setup-test-venv.sh";
    return {};
  }
  const fs::path out = scratch / "tensorboard.json";
  const std::string command = python.string() + " " + LT_SOURCE_DIR +
                              "/tests/train/tensorboard_reader.py " + logdir.string() + " > " +
                              out.string();
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  return nlohmann::json::parse(read_text(out));
}

TEST(TensorBoard, ScalarsEqualMetricsLinesAndAResumeReplacesItsSteps) {
  TempDir tmp("tensorboard");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 11);
  write_text(tmp / "heldout.jsonl", "{\"input_ids\": [5, 9, 13, 2, 40, 41]}\n");
  const fs::path out = tmp / "out";
  const auto config = [&](const std::string& lr) {
    return fixture_config(
        fixture("qwen3"), tmp / "data.jsonl", out,
        {"data.eval_path=" + (tmp / "heldout.jsonl").string(), "train.eval_every=2",
         "train.save_every=2", "train.keep_last=5", "optim.lr=" + lr, "out.overwrite=true"});
  };
  train_quietly(config("1e-3"));
  // Steps 2 and 3 again from step-2's checkpoint, at another learning rate
  // (in place of step-4: out.overwrite): the first run's values of those
  // steps must disappear from the view.
  train_quietly(config("3e-3"), (out / "step-2").string());
  const auto lines = read_metrics(out);
  ASSERT_EQ(lines.size(), 4u);

  std::string skip;
  const nlohmann::json view = read_with_tensorboard(tensorboard_dir(out), tmp.path(), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(view.at("files").get<int>(), 2);  // one per run
  const nlohmann::json& scalars = view.at("scalars");

  std::map<std::string, std::vector<std::pair<int64_t, double>>> expected;
  for (const auto& line : lines)
    for (const auto& s : tensorboard_scalars(line))
      expected[s.tag].push_back({line.at("step").get<int64_t>(), s.value});
  for (const char* tag : {"train/loss", "train/lr", "train/grad_norm", "speed/tokens_per_s",
                          "speed/tflops", "time/compute_s", "memory/host_peak_gb", "eval/loss"})
    EXPECT_TRUE(expected.count(tag)) << tag;

  ASSERT_EQ(scalars.size(), expected.size()) << scalars.dump();
  for (const auto& [tag, points] : expected) {
    ASSERT_TRUE(scalars.contains(tag)) << tag;
    const auto& got = scalars.at(tag);
    ASSERT_EQ(got.size(), points.size()) << tag << ": " << got.dump();
    for (size_t i = 0; i < points.size(); ++i) {
      EXPECT_EQ(got[i][0].get<int64_t>(), points[i].first) << tag;
      EXPECT_EQ(got[i][1].get<double>(), points[i].second) << tag << " at " << points[i].first;
    }
  }
  // The values are the metrics lines' own, to float32 precision, and the
  // resumed steps carry the second run's learning rate.
  const auto& loss = scalars.at("train/loss");
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(loss[i][1].get<double>(),
              static_cast<double>(static_cast<float>(lines[i].at("loss").get<double>())));
  EXPECT_FLOAT_EQ(scalars.at("train/lr")[3][1].get<float>(), 3e-3f);
  EXPECT_FLOAT_EQ(scalars.at("train/lr")[1][1].get<float>(), 1e-3f);
}

// A run resumed from another folder's checkpoint into an out.dir holding
// another run (out.overwrite) starts metrics.jsonl over, and TensorBoard's
// view with it: the other run's steps below this one's first stayed there.
TEST(TensorBoard, ARunResumedFromElsewhereShowsOnlyItsOwnSteps) {
  TempDir tmp("tensorboard_elsewhere");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 11);
  const auto config = [&](const fs::path& out, const std::string& steps) {
    return fixture_config(fixture("qwen3"), tmp / "data.jsonl", out,
                          {"train.steps=" + steps, "train.save_every=2", "out.overwrite=true"});
  };
  train_quietly(config(tmp / "other", "2"));
  train_quietly(config(tmp / "out", "4"));
  train_quietly(config(tmp / "out", "4"), (tmp / "other" / "step-2").string());
  const auto lines = read_metrics(tmp / "out");
  ASSERT_EQ(lines.size(), 2u);  // steps 2 and 3
  std::string skip;
  const nlohmann::json view =
      read_with_tensorboard(tensorboard_dir(tmp / "out"), tmp.path(), &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  EXPECT_EQ(view.at("files").get<int>(), 1);
  const auto& loss = view.at("scalars").at("train/loss");
  ASSERT_EQ(loss.size(), 2u) << loss.dump();
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(loss[i][0].get<int64_t>(), lines[i].at("step").get<int64_t>());
    EXPECT_EQ(loss[i][1].get<double>(),
              static_cast<double>(static_cast<float>(lines[i].at("loss").get<double>())));
  }
}

// A TensorBoard event that cannot be written (the file size limit, set
// one byte past what the event file holds after its opening events, stands
// in for a full disk) ends TensorBoard logging with one warning naming the
// file, and the metrics lines (small enough to stay under the limit) go on:
// three of them, the event file no longer grown.
TEST(TensorBoard, AFailedEventWriteWarnsOnceAndTheMetricsLinesGoOn) {
  TempDir tmp("tensorboard_full");
  std::vector<std::string> warnings;
  MetricsWriter metrics(tmp / "metrics.jsonl", false, 0,
                        [&](const std::string& w) { warnings.push_back(w); });
  std::vector<fs::path> events;
  for (const auto& entry : fs::directory_iterator(tensorboard_dir(tmp.path())))
    events.push_back(entry.path());
  ASSERT_EQ(events.size(), 1u);
  const auto opened = static_cast<rlim_t>(fs::file_size(events[0]));
  ASSERT_GT(opened, 3 * std::string("{\"step\":0}\n").size());  // the lines fit under the limit

  std::string error;
  {
    const lt::testing::FileSizeLimit limit(opened + 1);
    try {
      for (int step = 0; step < 3; ++step) metrics.write({{"step", step}});
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  EXPECT_EQ(error, "");
  EXPECT_EQ(count_lines(tmp / "metrics.jsonl"), 3u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("TensorBoard logging stopped at step 0: " + events[0].string()),
            std::string::npos)
      << warnings[0];
  EXPECT_LE(fs::file_size(events[0]), opened + 1);
}

// The tags and values, worked by hand from the line.
TEST(TensorBoard, EveryNumberOfAMetricsLineIsAScalarGroupedByWhatItMeasures) {
  const nlohmann::json line = {{"step", 4},
                               {"loss", 2.5},
                               {"executor", "streaming"},
                               {"skipped", true},
                               {"peak_bytes", {{"gpu", 3000000000}, {"host", 500000000}}},
                               {"predicted_gpu_peak_bytes", 2500000000},
                               {"eval_loss", 1.25},
                               {"eval_accuracy", 0.5},
                               {"a_new_figure", 7}};
  std::map<std::string, float> got;
  for (const auto& s : tensorboard_scalars(line)) got[s.tag] = s.value;
  const std::map<std::string, float> expected = {
      {"train/loss", 2.5f},          {"memory/gpu_peak_gb", 3.0f},
      {"memory/host_peak_gb", 0.5f}, {"memory/planned_gpu_peak_gb", 2.5f},
      {"eval/loss", 1.25f},          {"eval/accuracy", 0.5f},
      {"other/a_new_figure", 7.0f}};
  EXPECT_EQ(got, expected);
}

TEST(TrainPrints, ThePlanLineNamesExecutorMemoryAndPredictedTokensPerSecond) {
  RunPlan p;
  p.device = Device::cuda(0);
  p.executor = exec::ExecutorKind::Streaming;
  p.budget.add(exec::MemorySpace::Gpu, "weights", 6'800'000'000);
  p.budget.add(exec::MemorySpace::Host, "masters", 80'000'000'000);
  p.sizes.batch_size = 64;
  p.sizes.seq_len = 1024;
  p.predicted_step_s = 3.2;  // 64 x 1024 tokens / 3.2 s = 20,480 tokens/s
  EXPECT_EQ(run_plan_line(p),
            "plan: executor streaming on cuda:0; memory planned: gpu 6.80 GB, host 80.00 GB, "
            "disk 0.00 GB; predicted 20480 tokens/s (3.200 s a step of 64 x 1024 tokens)");
  p.predicted_step_s = 0;
  EXPECT_NE(run_plan_line(p).find("no predicted speed"), std::string::npos);
  // The CPU standing in for the GPU: its bytes are the device's, not a GPU's.
  p.device = Device::cpu();
  EXPECT_EQ(run_plan_line(p).rfind("plan: executor streaming on cpu; memory planned: device (host "
                                   "memory) 6.80 GB, host 80.00 GB, disk 0.00 GB;",
                                   0),
            0u)
      << run_plan_line(p);
}

TEST(TrainPrints, TheEndSaysWhereToLook) {
  TempDir tmp("where_to_look");
  const fs::path out = tmp / "x";
  fs::create_directories(out);
  for (const char* name : {"metrics.jsonl", "config.yaml", "loss.png"}) write_text(out / name, "x");
  EXPECT_EQ(where_to_look(out, out / "step-30", false),
            "outputs: " + out.string() + " (metrics.jsonl, config.yaml, loss.png)\n" +
                "  watch:       tensorboard --logdir " + (out / "tb").string() + "\n" +
                "  checkpoints: " + (out / "step-30").string() +
                " (the latest; a Hugging Face folder)\n");
  EXPECT_NE(where_to_look(out, "", false).find("checkpoints: none saved"), std::string::npos);
  // The streaming executor writes out.dir/trace.json: named with the rest.
  EXPECT_EQ(where_to_look(out, "", true)
                .rfind("outputs: " + out.string() +
                           " (metrics.jsonl, config.yaml, loss.png, trace.json)\n",
                       0),
            0u);
  // No loss.png drawn (no gnuplot, or no loss to draw): not listed.
  fs::remove(out / "loss.png");
  EXPECT_EQ(where_to_look(out, "", false)
                .rfind("outputs: " + out.string() + " (metrics.jsonl, config.yaml)\n", 0),
            0u);
}

}  // namespace
}  // namespace lt::train::testing
