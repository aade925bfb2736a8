// Note [ZenFlow's saves] (exec/offload_zenflow_state.cpp): a save keeps the
// device's columns and their moments, and the checkpoint holds them, so
// how often a run saves does not change what it trains, and a resume goes
// on as the saving run did. Against resident's AdamW: with every column on
// the device and a window of one step, ZenFlow is resident bit for bit,
// saving every 3 steps or not, and resumed from a save. (A save restarted
// the moments: the saving run left resident right after its first save.)
#include <gtest/gtest.h>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

std::vector<std::string> every_column(int64_t steps, int64_t save_every,
                                      const std::string& topk = "1") {
  return {"train.steps=" + std::to_string(steps),
          "train.batch_size=4",
          "optim.lr=5e-3",
          "exec.mode=zenflow",
          "exec.zenflow.topk_ratio=" + topk,
          "exec.zenflow.update_interval=1",
          "exec.zenflow.select_strategy=step",
          "exec.zenflow.select_interval=50",
          "exec.zenflow.full_warm_up_rounds=0",
          "train.save_every=" + std::to_string(save_every)};
}

class ZenFlowSaves : public ::testing::Test {
 protected:
  void SetUp() override { write_random_tokens(tmp_ / "data.jsonl", 12, 97, 5); }
  TrainConfig config(const std::string& out, const std::vector<std::string>& sets) {
    return fixture_config(fixture("llama"), tmp_ / "data.jsonl", tmp_ / out, sets);
  }
  std::vector<double> losses(const std::string& out) {
    return field(read_metrics(tmp_ / out), "loss");
  }
  TempDir tmp_{"zenflow_saves"};
};

TEST_F(ZenFlowSaves, EveryColumnIsResidentSavedOrNotAndResumed) {
  train_quietly(config("resident", {"train.steps=6", "train.batch_size=4", "optim.lr=5e-3"}));
  train_quietly(config("unsaved", every_column(6, 0)));
  train_quietly(config("saved", every_column(6, 3)));
  train_quietly(config("resumed", every_column(3, 3)));
  train_quietly(config("resumed", every_column(6, 3)), "latest");
  const auto resident = losses("resident");
  ASSERT_EQ(resident.size(), 6u);
  for (const char* run : {"unsaved", "saved", "resumed"}) {
    const auto got = losses(run);
    ASSERT_EQ(got.size(), 6u) << run;
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got[i], resident[i]) << run << ", step " << i + 1;
  }
  EXPECT_EQ(read_text(tmp_ / "saved" / "step-6" / "model.safetensors"),
            read_text(tmp_ / "resumed" / "step-6" / "model.safetensors"));
}

// A checkpoint whose device columns another exec.zenflow.topk_ratio chose
// is said, and its columns are chosen afresh; the run trains on.
TEST_F(ZenFlowSaves, AnotherTopkRatioChoosesTheColumnsAfreshAndSaysSo) {
  train_quietly(config("run", every_column(3, 3, "0.25")));
  ::testing::internal::CaptureStderr();
  train_quietly(config("run", every_column(5, 3, "0.5")), "latest");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(log, "resume: the checkpoint's ZenFlow device holds ");
  EXPECT_MENTIONS(log, "which exec.zenflow.topk_ratio 0.5 does not give");
  EXPECT_MENTIONS(log, "the device's columns are chosen afresh at the first step");
  EXPECT_EQ(read_metrics(tmp_ / "run").size(), 5u);
}

}  // namespace
}  // namespace lt::train::testing
