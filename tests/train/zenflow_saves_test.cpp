// Note [ZenFlow's saves] (train/trainer.cpp): a save restarts the device
// columns' moments, as a reselection does, so saves more often than
// reselections change the training. Against resident's AdamW: with every
// column on the device and a window of one step, ZenFlow is resident bit
// for bit without saves, and leaves it right after a save. The run says so
// at its start where train.save_every is shorter than the reselection's
// interval.
#include <gtest/gtest.h>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

std::vector<std::string> every_column(int64_t save_every) {
  return {"train.steps=6",
          "train.batch_size=4",
          "optim.lr=5e-3",
          "exec.mode=zenflow",
          "exec.zenflow.topk_ratio=1",
          "exec.zenflow.update_interval=1",
          "exec.zenflow.select_strategy=step",
          "exec.zenflow.select_interval=50",
          "exec.zenflow.full_warm_up_rounds=0",
          "train.save_every=" + std::to_string(save_every)};
}

TEST(ZenFlowSaves, EveryColumnIsResidentUntilASaveRestartsTheMoments) {
  TempDir tmp("zenflow_saves");
  write_random_tokens(tmp / "data.jsonl", 12, 97, 5);
  const fs::path data = tmp / "data.jsonl";
  train_quietly(fixture_config(fixture("llama"), data, tmp / "resident",
                               {"train.steps=6", "train.batch_size=4", "optim.lr=5e-3"}));
  train_quietly(fixture_config(fixture("llama"), data, tmp / "unsaved", every_column(0)));
  train_quietly(fixture_config(fixture("llama"), data, tmp / "saved", every_column(3)));
  const auto resident = field(read_metrics(tmp / "resident"), "loss");
  const auto unsaved = field(read_metrics(tmp / "unsaved"), "loss");
  const auto saved = field(read_metrics(tmp / "saved"), "loss");
  ASSERT_EQ(resident.size(), 6u);
  ASSERT_EQ(unsaved.size(), 6u);
  ASSERT_EQ(saved.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(unsaved[i], resident[i]) << "step " << i + 1;
  // Steps 1-4 ran on weights the first three updates made alike; step 4's
  // update, the first after the save at step 3, started from zero moments.
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(saved[i], resident[i]) << "step " << i + 1;
  EXPECT_NE(saved[4], resident[4]);
}

TEST(ZenFlowSaves, ARunSavingMoreOftenThanItReselectsSaysSo) {
  TempDir tmp("zenflow_save_note");
  write_random_tokens(tmp / "data.jsonl", 12, 97, 5);
  fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "run", every_column(2));
  const auto output_with = [&](int64_t save_every) {
    std::vector<std::string> args = {"train", (tmp / "run.yaml").string(), "--no-sample"};
    for (const std::string& set : every_column(save_every)) args.insert(args.end(), {"--set", set});
    args.insert(args.end(), {"--set", "out.overwrite=true"});
    std::string output;
    EXPECT_EQ(run_program(args, tmp / "run.log", &output, 120), 0) << output;
    return output;
  };
  EXPECT_MENTIONS(output_with(2),
                  "zenflow: each save (train.save_every 2) ends the open window and writes the "
                  "device's columns back; the next step selects columns afresh, their moments at "
                  "zero, as a reselection does (every 50 steps here)");
  EXPECT_EQ(output_with(0).find("zenflow: each save"), std::string::npos);
}

}  // namespace
}  // namespace lt::train::testing
