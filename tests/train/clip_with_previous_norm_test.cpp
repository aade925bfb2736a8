// train.clip_with_previous_norm through the trainer: a run resumed from a
// checkpoint clips its first step with the norm the checkpoint stored, so
// it continues with the uninterrupted run's losses bit for bit (streaming,
// states on disk, updating during the backward); the option changes the
// numerics; and the executors that do not support it refuse it by name.
#include <gtest/gtest.h>

#include "support/errors.h"
#include "train/checkpoint.h"
#include "train/run_plan.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

std::vector<std::string> overrides(int64_t steps, bool option) {
  return {"train.steps=" + std::to_string(steps),
          "train.batch_size=4",
          "train.grad_accum=2",
          "train.grad_clip=0.05",  // every step clips
          "train.clip_with_previous_norm=" + std::string(option ? "true" : "false"),
          "optim.lr=5e-3",
          "optim.no_decay=[norm]",
          "exec.mode=streaming",
          "exec.state_placement=disk"};
}

TEST(ClipWithPreviousNorm, ResumeContinuesAsTheUninterruptedRun) {
  TempDir tmp("clip_previous");
  write_random_tokens(tmp / "data.jsonl", 12, 97, 11);
  const fs::path data = tmp / "data.jsonl";
  train_quietly(fixture_config(fixture("llama"), data, tmp / "a", overrides(5, true)));
  const auto a = read_metrics(tmp / "a");
  ASSERT_EQ(a.size(), 5u);

  train_quietly(fixture_config(fixture("llama"), data, tmp / "b", overrides(2, true)));
  const CheckpointContents ck = read_checkpoint(tmp / "b" / "step-2");
  EXPECT_EQ(ck.state.previous_grad_norm, a[1].at("grad_norm").get<double>());
  train_quietly(fixture_config(fixture("llama"), data, tmp / "b", overrides(5, true)), "latest");
  const auto b = read_metrics(tmp / "b");
  ASSERT_EQ(b.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i)
    for (const char* key : {"loss", "grad_norm"})
      EXPECT_EQ(a[i].at(key).get<double>(), b[i].at(key).get<double>()) << key << " of step " << i;

  // Exact clipping gives other numbers from the second step on (the first
  // clips exactly either way).
  train_quietly(fixture_config(fixture("llama"), data, tmp / "c", overrides(3, false)));
  const auto c = read_metrics(tmp / "c");
  const auto loss = [](const nlohmann::json& j) { return j.at("loss").get<double>(); };
  EXPECT_EQ(loss(a[0]), loss(c[0]));
  EXPECT_EQ(loss(a[1]), loss(c[1]));
  EXPECT_NE(loss(a[2]), loss(c[2]));
}

TEST(ClipWithPreviousNorm, OffloadAndZenFlowRefuseItByName) {
  TempDir tmp("clip_previous_modes");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 2);
  const models::ModelConfig model =
      models::ModelConfig::from_file(fixture("llama") / "config.json");
  for (const char* mode : {"offload", "zenflow"}) {
    const TrainConfig c =
        fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "out",
                       {"train.clip_with_previous_norm=true", std::string("exec.mode=") + mode});
    const std::string e = lt::testing::error_of([&] { resolve_run(c, model); });
    EXPECT_NE(e.find("train.clip_with_previous_norm"), std::string::npos) << e;
    EXPECT_NE(e.find(mode), std::string::npos) << e;
  }
  for (const char* mode : {"resident", "streaming"})
    resolve_run(
        fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "out",
                       {"train.clip_with_previous_norm=true", std::string("exec.mode=") + mode}),
        model);
}

}  // namespace
}  // namespace lt::train::testing
