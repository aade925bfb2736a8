// SIGINT (and SIGTERM) stop a run cleanly: the current step finishes, a
// checkpoint is saved, a resume hint is printed and the exit status is 0.
#include <gtest/gtest.h>

#include "train/checkpoint.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

void stop_mid_run(int sig) {
  TempDir tmp(std::string("signal") + std::to_string(sig));
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const fs::path out = tmp / "out";
  const int64_t steps = 100000;
  Child child({"train", "--no-sample",
               "--set", "model.path=" + fixture("qwen3").string(),
               "--set", "model.init=pretrained",
               "--set", "data.path=" + (tmp / "data.jsonl").string(),
               "--set", "data.format=tokens",
               "--set", "data.pack=false",
               "--set", "train.steps=" + std::to_string(steps),
               "--set", "train.batch_size=2",
               "--set", "train.seq_len=16",
               "--set", "train.save_every=0",
               "--set", "sched.warmup_steps=0",
               "--set", "sched.name=constant",
               "--set", "sched.min_lr=0",
               "--set", "out.dir=" + out.string()},
              tmp / "run.log");
  ASSERT_TRUE(wait_for_lines(child, out / "metrics.jsonl", 3)) << child.output();
  child.signal(sig);
  const int status = child.wait(30);
  const std::string output = child.output();
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_NE(output.find("--resume latest"), std::string::npos) << output;

  // The steps logged are the steps saved: the step in flight was finished.
  const auto metrics = read_metrics(out);
  ASSERT_GE(metrics.size(), 3u);
  ASSERT_LT(metrics.size(), static_cast<size_t>(steps));
  const fs::path latest = resolve_checkpoint("latest", out);
  EXPECT_EQ(latest, out / ("step-" + std::to_string(metrics.size())));
  EXPECT_EQ(read_checkpoint(latest).state.step, static_cast<int64_t>(metrics.size()));
  EXPECT_EQ(metrics.back().at("step").get<int64_t>(), static_cast<int64_t>(metrics.size()) - 1);
}

TEST(StopSignal, SigintFinishesTheStepSavesAndExitsZero) {
  stop_mid_run(SIGINT);
}
TEST(StopSignal, SigtermFinishesTheStepSavesAndExitsZero) {
  stop_mid_run(SIGTERM);
}

}  // namespace
}  // namespace lt::train::testing
