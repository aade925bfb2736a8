// A GPU streaming run with every stage's states on disk (exec.state_placement
// disk) makes each disk stage's optimizer states a stage at a time as the
// executor writes them out (Note [Stage states on disk], "the start"): the
// host memory that setting up the run holds at its peak stays below every
// stage's masters and states together (12 bytes a parameter with adamw),
// which the host placement exceeds; and the losses are the host-placed
// run's bit for bit.
#include <gtest/gtest.h>

#include "gpu_test_support.h"
#include "models/config.h"
#include "train/train_helpers.h"

namespace lt::train::testing {
namespace {

TEST(SetupMemoryGpu, DiskStagesStartBelowEveryStagesStatesAndTrainAsHost) {
  LT_REQUIRE_GPU();
  TempDir tmp("gpu_setup_memory");
  write_random_tokens(tmp / "data.jsonl", 16, 97, 3);
  auto config = [&](const std::string& placement) {
    return fixture_config(
        fixture("qwen2"), tmp / "data.jsonl", tmp / placement,
        {"train.steps=3", "train.batch_size=4", "train.device=cuda", "train.dtype=bf16",
         "exec.mode=streaming", "exec.state_placement=" + placement});
  };
  const int64_t all_masters_and_states =
      12 * models::ModelConfig::from_file(fixture("qwen2") / "config.json").num_parameters();
  const TrainRunResult host = train_quietly(config("host"));
  const TrainRunResult disk = train_quietly(config("disk"));
  EXPECT_GT(host.setup_host_peak_bytes, all_masters_and_states);
  EXPECT_LT(disk.setup_host_peak_bytes, all_masters_and_states);
  const auto want = read_metrics(tmp / "host"), got = read_metrics(tmp / "disk");
  ASSERT_EQ(want.size(), 3u);
  EXPECT_EQ(field(got, "loss"), field(want, "loss"));
}

}  // namespace
}  // namespace lt::train::testing
