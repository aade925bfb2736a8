// A GPU streaming run with every stage's states on disk (exec.state_placement
// disk) makes each disk stage's optimizer states a stage at a time as the
// executor writes them out (Note [Stage states on disk], "the start"): the
// host memory that setting up the run holds at its peak stays below every
// stage's masters and states together (12 bytes a parameter with adamw),
// which the host placement exceeds; and the losses are the host-placed
// run's bit for bit.
//
// The masters likewise (SetupMemoryGpu.StreamedMasters*): the plan is
// resolved from config.json first and each disk stage's masters are loaded
// as the executor writes it out, the pinned bf16 copies filled from each
// stage as it passes. The host memory (cpu_allocator; the pinned copies and slabs
// are the pinned pool's) that setting up the run holds at its peak then
// stays below the masters of every stage together, which the host
// placement holds; and the losses are the host-placed run's bit for bit,
// from random init and from a safetensors folder (the disk stages' bf16
// copies are what the GPU computes with: one left unfilled would change
// them).
#include <gtest/gtest.h>

#include "core/random.h"
#include "gpu_test_support.h"
#include "io/hf_model.h"
#include "models/config.h"
#include "support/fixture_models.h"
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

TEST(SetupMemoryGpu, StreamedMastersStartBelowEveryMasterAndTrainAsHost) {
  LT_REQUIRE_GPU();
  TempDir tmp("gpu_streamed_masters");
  write_random_tokens(tmp / "data.jsonl", 16, 97, 3);
  // 12 blocks of hidden 256: a block's stage is about a twelfth of the masters.
  const models::ModelConfig shape = lt::testing::twelve_block_qwen2_config();
  fs::create_directories(tmp / "random");
  write_text(tmp / "random" / "config.json", shape.to_json());
  Generator gen(5);
  io::save_hf_model(models::CausalLM::random(shape, gen), tmp / "saved", DType::F32);
  const int64_t all_masters = 4 * shape.num_parameters();
  for (const std::string model : {"random", "saved"}) {
    SCOPED_TRACE(model);
    auto config = [&](const std::string& placement) {
      return fixture_config(
          tmp / model, tmp / "data.jsonl", tmp / (model + "_" + placement),
          {"model.init=" + std::string(model == "random" ? "random" : "pretrained"),
           "train.steps=3", "train.batch_size=4", "train.device=cuda", "train.dtype=bf16",
           "exec.mode=streaming", "exec.weight_uploads=bf16", "exec.state_placement=" + placement});
    };
    const TrainRunResult host = train_quietly(config("host"));
    const TrainRunResult disk = train_quietly(config("disk"));
    EXPECT_GT(host.setup_host_peak_bytes, all_masters);
    EXPECT_LT(disk.setup_host_peak_bytes, all_masters);
    const auto want = read_metrics(tmp / (model + "_host"));
    const auto got = read_metrics(tmp / (model + "_disk"));
    ASSERT_EQ(want.size(), 3u);
    EXPECT_EQ(field(got, "loss"), field(want, "loss"));
  }
}

}  // namespace
}  // namespace lt::train::testing
