// train.clip_with_previous_norm through the trainer: a run resumed from a
// checkpoint clips its first step with the norm the checkpoint stored, so
// it continues with the uninterrupted run's losses bit for bit (streaming,
// states on disk, updating during the backward); the option changes the
// numerics; and the executors that do not support it refuse it by name.
#include <gtest/gtest.h>

#include "support/errors.h"
#include "train/checkpoint.h"
#include "train/executor_auto.h"
#include "train/executor_choice.h"
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

// exec.mode auto never picks an executor that would refuse the key: with a
// device that holds ZenFlow's count but not resident's (where auto picks
// ZenFlow without the option), ZenFlow and offload are marked as not
// fitting, and the run streams.
TEST(ClipWithPreviousNorm, ModeAutoLeavesOffloadAndZenFlowOut) {
  TempDir tmp("clip_previous_auto");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 2);
  const models::ModelConfig model =
      models::ModelConfig::from_file(fixture("llama") / "config.json");
  const auto config = [&](std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), {"train.batch_size=8", "train.grad_accum=2"});
    return fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "out", overrides);
  };
  const auto all = whole_model_candidates(config({}), model, Device::cpu(),
                                          choose_for_run(config({}), model, Device::cpu()));
  ASSERT_EQ(all.size(), 3u);
  const double gb = static_cast<double>(all[0].gpu_bytes + all[1].gpu_bytes) / 2 / 1e9;
  const std::string capped = "exec.device_memory_gb=" + std::to_string(gb);
  const TrainConfig on = config({capped, "train.clip_with_previous_norm=true"});
  for (const ExecutorCandidate& e :
       whole_model_candidates(on, model, Device::cpu(), choose_for_run(on, model, Device::cpu())))
    if (e.executor != exec::ExecutorKind::Resident) {
      EXPECT_FALSE(e.fits) << exec::executor_name(e.executor);
      EXPECT_NE(e.detail.find("train.clip_with_previous_norm"), std::string::npos) << e.detail;
    }
  EXPECT_EQ(resolve_run(on, model).executor, exec::ExecutorKind::Streaming);
}

}  // namespace
}  // namespace lt::train::testing
