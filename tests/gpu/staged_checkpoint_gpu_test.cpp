// Checkpoints, evaluations and resumes of a GPU streaming run with states
// on disk (exec.state_placement disk) read the disk stages one at a time
// (exec/staged_states.h): against the same run with every state in host
// memory, the step-2 checkpoint's files are equal byte for byte, the
// held-out loss and the losses of a resume from it to step 4 bit for bit
// (adamw8bit; the pinned bf16 copies the GPU uploads stay in host memory).
#include <gtest/gtest.h>

#include "gpu_test_support.h"
#include "train/train_helpers.h"

namespace lt::train::testing {
namespace {

TEST(StagedCheckpointGpu, DiskSavesEvaluatesAndResumesAsHost) {
  LT_REQUIRE_GPU();
  TempDir tmp("gpu_staged_checkpoint");
  write_random_tokens(tmp / "data.jsonl", 16, 97, 3);
  write_random_tokens(tmp / "heldout.jsonl", 5, 97, 8);
  auto config = [&](const std::string& placement, int steps) {
    return fixture_config(
        fixture("qwen2"), tmp / "data.jsonl", tmp / placement,
        {"train.steps=" + std::to_string(steps), "train.batch_size=4", "train.save_every=2",
         "train.eval_every=2", "data.eval_path=" + (tmp / "heldout.jsonl").string(),
         "optim.name=adamw8bit", "optim.min_8bit_numel=64", "train.device=cuda", "train.dtype=bf16",
         "exec.mode=streaming", "exec.state_placement=" + placement});
  };
  train_quietly(config("host", 4));
  train_quietly(config("disk", 2));
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(read_text(tmp / "disk" / "step-2" / file) ==
                read_text(tmp / "host" / "step-2" / file))
        << file;
  train_quietly(config("disk", 4), (tmp / "disk" / "step-2").string());
  const auto want = read_metrics(tmp / "host"), got = read_metrics(tmp / "disk");
  ASSERT_EQ(want.size(), 4u);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(field(got, "loss"), field(want, "loss"));
  for (size_t s : {size_t{1}, size_t{3}})
    EXPECT_EQ(got[s].at("eval_loss").get<double>(), want[s].at("eval_loss").get<double>()) << s;
}

}  // namespace
}  // namespace lt::train::testing
