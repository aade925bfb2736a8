// Exact resume: 3 steps + a resume to 6 give bitwise the losses of 6 steps
// in one go (weights, AdamW moments and the sampler position all restored;
// the data crosses an epoch boundary on the way).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

#include "io/safetensors.h"
#include "train/checkpoint.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

std::vector<std::string> resume_overrides(int64_t steps) {
  // 12 rows, batch 4: an epoch every 3 steps, so the resume point is an
  // epoch boundary and step 5 is mid-epoch; clipping and decay on.
  return {"train.steps=" + std::to_string(steps),
          "train.batch_size=4",
          "train.grad_accum=2",
          "train.grad_clip=0.5",
          "optim.lr=5e-3",
          "optim.no_decay=[norm]"};
}

uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

void expect_bitwise_equal(const std::vector<nlohmann::json>& a, size_t a_from,
                          const std::vector<nlohmann::json>& b, size_t b_from, size_t n) {
  ASSERT_GE(a.size(), a_from + n);
  ASSERT_GE(b.size(), b_from + n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(a[a_from + i].at("step"), b[b_from + i].at("step"));
    for (const char* key : {"loss", "grad_norm", "lr"}) {
      const double x = a[a_from + i].at(key).get<double>(), y = b[b_from + i].at(key).get<double>();
      EXPECT_EQ(bits(x), bits(y)) << key << " of step " << a[a_from + i].at("step") << ": " << x
                                  << " vs " << y;
    }
  }
}

TEST(Resume, LatestContinuesBitwiseLikeAnUninterruptedRun) {
  TempDir tmp("resume");
  write_random_tokens(tmp / "data.jsonl", 12, 97, 11);
  const fs::path data = tmp / "data.jsonl";

  train_quietly(fixture_config(fixture("llama"), data, tmp / "a", resume_overrides(6)));
  auto a = read_metrics(tmp / "a");
  ASSERT_EQ(a.size(), 6u);

  TrainRunResult b =
      train_quietly(fixture_config(fixture("llama"), data, tmp / "b", resume_overrides(3)));
  EXPECT_EQ(b.steps_done, 3);
  ASSERT_TRUE(fs::exists(tmp / "b" / "step-3" / "trainer_state.json"));
  EXPECT_EQ(read_checkpoint(tmp / "b" / "step-3").state.step, 3);

  TrainRunResult b2 = train_quietly(
      fixture_config(fixture("llama"), data, tmp / "b", resume_overrides(6)), "latest");
  EXPECT_EQ(b2.steps_done, 6);
  auto b_metrics = read_metrics(tmp / "b");
  ASSERT_EQ(b_metrics.size(), 6u);
  for (size_t i = 0; i < b_metrics.size(); ++i) {
    EXPECT_EQ(b_metrics[i].at("step").get<int64_t>(), static_cast<int64_t>(i));
  }
  expect_bitwise_equal(a, 0, b_metrics, 0, 6);

  // The final checkpoints agree too.
  auto ck_a = read_checkpoint(tmp / "a" / "step-6");
  auto ck_b = read_checkpoint(tmp / "b" / "step-6");
  EXPECT_EQ(ck_a.state.sampler, ck_b.state.sampler);
  EXPECT_EQ(read_text(tmp / "a" / "step-6" / "model.safetensors"),
            read_text(tmp / "b" / "step-6" / "model.safetensors"));
}

TEST(Resume, FromAnExplicitCheckpointFolder) {
  TempDir tmp("resume_dir");
  write_random_tokens(tmp / "data.jsonl", 12, 97, 11);
  const fs::path data = tmp / "data.jsonl";
  train_quietly(fixture_config(fixture("llama"), data, tmp / "a", resume_overrides(6)));
  auto a = read_metrics(tmp / "a");
  ASSERT_EQ(a.size(), 6u);

  // Save every step; resume from step-2 (not the latest) into another out.dir.
  auto overrides = resume_overrides(4);
  overrides.push_back("train.save_every=1");
  overrides.push_back("train.keep_last=5");
  train_quietly(fixture_config(fixture("llama"), data, tmp / "b", overrides));
  ASSERT_TRUE(fs::exists(tmp / "b" / "step-4"));
  TrainRunResult c =
      train_quietly(fixture_config(fixture("llama"), data, tmp / "c", resume_overrides(6)),
                    (tmp / "b" / "step-2").string());
  EXPECT_EQ(c.steps_done, 6);
  auto c_metrics = read_metrics(tmp / "c");
  ASSERT_EQ(c_metrics.size(), 4u);  // steps 2..5: a fresh out.dir has no earlier lines
  expect_bitwise_equal(a, 2, c_metrics, 0, 4);

  // A folder that is not a checkpoint is refused, naming it.
  try {
    train_quietly(fixture_config(fixture("llama"), data, tmp / "d", resume_overrides(6)),
                  (tmp / "b").string());
    ADD_FAILURE() << "resuming from a non-checkpoint folder did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trainer_state.json"), std::string::npos) << e.what();
  }
}

// A checkpoint's optimizer states that do not fit, or hold a NaN, are
// refused naming the file (the message named only an internal function
// and tensor); the NaN went into the first update and every weight.
TEST(Resume, AnOptimizerFileThatDoesNotFitIsNamed) {
  TempDir tmp("resume_optimizer_file");
  write_random_tokens(tmp / "data.jsonl", 12, 97, 11);
  const fs::path data = tmp / "data.jsonl";
  train_quietly(fixture_config(fixture("llama"), data, tmp / "a", resume_overrides(2)));
  const fs::path file = tmp / "a" / "step-2" / "optimizer.safetensors";
  std::map<std::string, Tensor> states = io::read_safetensors(file);
  const auto damage = [&](const std::function<void(std::map<std::string, Tensor>&)>& edit) {
    std::map<std::string, Tensor> copy;
    for (const auto& [name, t] : states) copy.emplace(name, t.clone());
    edit(copy);
    io::write_safetensors(file, {copy.begin(), copy.end()});
    return training_error(fixture_config(fixture("llama"), data, tmp / "a", resume_overrides(4)),
                          (tmp / "a" / "step-2").string());
  };
  const std::string nan = damage([](auto& s) {
    s.at("embed.tokens.weight.exp_avg").template data<float>()[5] = std::nanf("");
  });
  EXPECT_MENTIONS(nan, "resume: loading the optimizer states of " +
                           (tmp / "a" / "step-2").string() +
                           " (optimizer.safetensors) failed: 'embed.tokens.weight.exp_avg' holds "
                           "nan at element 5");
  EXPECT_MENTIONS(nan, "resume from another checkpoint");
  const std::string missing = damage([](auto& s) { s.erase("embed.tokens.weight.exp_avg_sq"); });
  EXPECT_MENTIONS(missing,
                  "(optimizer.safetensors) failed: 'embed.tokens.weight.exp_avg_sq' is "
                  "missing");
}

// A resume to fewer steps than the checkpoint's run had (but more than its
// step) said the schedule was stretched; it is compressed. And a longer run
// under a decaying schedule raised the learning rate again without a word:
// the line gives the resumed step's rate both ways, here against HF's
// cosine formula, 1e-3 * 0.5 * (1 + cos(pi * step / steps)) with no warmup.
TEST(Resume, ANewLengthSaysWhetherTheScheduleStretchesOrCompresses) {
  TempDir tmp("resume_length");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const std::vector<std::string> six = {
      "train.steps=6",     "train.batch_size=4",   "train.save_every=2", "train.keep_last=5",
      "sched.name=cosine", "sched.warmup_steps=0", "sched.min_lr=0",     "optim.lr=1e-3"};
  train_quietly(fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "a", six));
  const auto cosine_at_step_2 = [](int steps) {
    return fmt::format("{:.4g}", 1e-3 * 0.5 * (1 + std::cos(M_PI * 2 / steps)));
  };
  for (const auto& [steps, says] : {std::pair{3, "compresses"}, std::pair{8, "stretches"}}) {
    std::vector<std::string> overrides = six;
    overrides[0] = "train.steps=" + std::to_string(steps);
    const fs::path out = tmp / ("to_" + std::to_string(steps));
    ::testing::internal::CaptureStderr();
    train_quietly(fixture_config(fixture("llama"), tmp / "data.jsonl", out, overrides),
                  (tmp / "a" / "step-2").string());
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("resume: train.steps: 6 -> " + std::to_string(steps) +
                       " (the checkpoint's -> this run's) " + says +
                       " the learning-rate schedule (sched.name cosine)"),
              std::string::npos)
        << log;
    EXPECT_MENTIONS(log, fmt::format("resume: step 3's learning rate is {} under this run's "
                                     "schedule (cosine, train.steps {}), {} from {} where the "
                                     "checkpoint's (train.steps 6) had it",
                                     cosine_at_step_2(steps), steps, steps > 6 ? "up" : "down",
                                     cosine_at_step_2(6)));
    EXPECT_EQ(log.find("would keep it there") != std::string::npos, steps > 6) << log;
  }
}

// `--resume latest` with no checkpoint to take is refused before the data
// is read (tokenizing millions of rows took minutes first): here a data
// file with a bad row under data.strict would have failed the run instead.
// And before the resolved config is printed, which the error followed.
TEST(Resume, ANothingToResumeIsRefusedBeforeTheDataIsRead) {
  TempDir tmp("resume_first");
  write_text(tmp / "data.jsonl", "{\"input_ids\": [1, 2, 3], \"labels\": [1, 2, 3]}\nnot json\n");
  ::testing::internal::CaptureStdout();
  const std::string error = training_error(
      fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "none", {"data.strict=true"}),
      "latest");
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(error.find("--resume latest: no complete checkpoint"), std::string::npos) << error;
  // What to do instead: a killed run's first save never finished.
  EXPECT_MENTIONS(error, "no save there has finished. Start the run without --resume");
  EXPECT_EQ(printed.find("resolved config"), std::string::npos) << printed;
}

// `--resume latest` where the checkpoint is at train.steps (train.steps
// not raised) loaded the model and the data, evaluated and sampled, then
// said in passing that nothing was left. It ends before the data is read:
// here a data file that has since gained a bad row under data.strict would
// have failed the run.
TEST(Resume, NothingLeftToTrainEndsBeforeTheDataIsRead) {
  TempDir tmp("resume_done");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const TrainConfig done = fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "run",
                                          {"train.steps=2", "train.batch_size=4"});
  train_quietly(done);
  write_text(tmp / "data.jsonl", "{\"input_ids\": [1, 2, 3]}\nnot json\n");
  TrainConfig again = done;
  again.data.strict = true;
  ::testing::internal::CaptureStdout();
  TrainRunOptions options;
  options.resume = "latest";
  const TrainRunResult r = run_training(again, options);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(r.steps_done, 2);
  EXPECT_FALSE(r.saved);
  EXPECT_EQ(r.last_checkpoint, (tmp / "run" / "step-2").string());
  EXPECT_NE(printed.find("resume: " + (tmp / "run" / "step-2").string() +
                         " is at step 2 and train.steps is 2: nothing is left to train (set "
                         "train.steps above 2 to train on)"),
            std::string::npos)
      << printed;
  EXPECT_EQ(printed.find("resolved config"), std::string::npos) << printed;
  EXPECT_EQ(read_metrics(tmp / "run").size(), 2u);
}

// A run killed after its last save and before its end drew loss.png left
// the plot's scratch files and no loss.png; a restart with nothing left to
// train draws it (from metrics.jsonl) and removes them, as the end would.
TEST(Resume, NothingLeftToTrainDrawsTheLossPlotAKilledEndDidNot) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)";
  TempDir tmp("resume_done_plot");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const TrainConfig done = fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "run",
                                          {"train.steps=2", "train.batch_size=4"});
  train_quietly(done);
  ASSERT_TRUE(fs::exists(tmp / "run" / "loss.png"));
  fs::remove(tmp / "run" / "loss.png");
  write_text(tmp / "run" / ".loss.dat", "1 5.0\n");
  write_text(tmp / "run" / ".loss.png.tmp", "");
  ::testing::internal::CaptureStdout();
  train_quietly(done, "latest");
  ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(read_text(tmp / "run" / "loss.png").substr(1, 3), "PNG");
  EXPECT_FALSE(fs::exists(tmp / "run" / ".loss.dat"));
  EXPECT_FALSE(fs::exists(tmp / "run" / ".loss.png.tmp"));
}

}  // namespace
}  // namespace lt::train::testing
