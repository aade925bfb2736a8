// Checkpoints, evaluations and resumes of a run whose masters and optimizer
// states are on disk (exec.state_placement disk, or auto under a small
// exec.host_memory_gb) go through the executor one stage at a time
// (exec/staged_states.h) instead of reading every stage back. Against the
// host-placed run as the outside reference: the saved weights and
// optimizer states are its files byte for byte (adamw and adamw8bit), the
// held-out loss is its loss bit for bit, and a resume from the disk run's
// checkpoint continues with the uninterrupted host run's losses bit for
// bit. The same for exec.mode offload and zenflow (Note [Offload states on
// disk]), whose evaluation reads the device weights. tests/train/
// staged_save_memory_test.cpp checks the save's host memory.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "train/run_plan.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class StagedCheckpoint : public ::testing::Test {
 protected:
  // The llama fixture's shape with 12 blocks (random weights): on the CPU
  // stand-in an offload disk stage adds an f32 upload copy and the three
  // largest come back in flight, so with adamw8bit only a model of many
  // stages saves host memory by moving some.
  StagedCheckpoint() : tmp_("staged_checkpoint") {
    write_random_tokens(tmp_ / "data.jsonl", 16, 97, 3);
    write_random_tokens(tmp_ / "heldout.jsonl", 5, 97, 8);
    write_fixture_config(tmp_ / "model", "llama", kBlocks);
  }
  static constexpr int kBlocks = 12;
  // `steps` steps (a checkpoint at the end, and at step 2), an evaluation
  // every 2 steps, into out.dir `out`, with exec.mode `mode`.
  TrainConfig config(const std::string& out, const std::string& optimizer,
                     const std::string& placement, int steps,
                     const std::vector<std::string>& more = {},
                     const std::string& mode = "streaming") {
    std::vector<std::string> keys = {
        "model.init=random",       "train.steps=" + std::to_string(steps),
        "train.batch_size=4",      "train.save_every=2",
        "train.eval_every=2",      "data.eval_path=" + (tmp_ / "heldout.jsonl").string(),
        "optim.name=" + optimizer, "optim.min_8bit_numel=64",
        "exec.mode=" + mode,       "exec.state_placement=" + placement};
    if (mode == "zenflow")  // windows of 2, a reselection every 2 steps, one warm-up step
      for (const char* z : {"exec.zenflow.topk_ratio=0.25", "exec.zenflow.update_interval=2",
                            "exec.zenflow.select_strategy=step", "exec.zenflow.select_interval=2",
                            "exec.zenflow.full_warm_up_rounds=1"})
        keys.push_back(z);
    keys.insert(keys.end(), more.begin(), more.end());
    return fixture_config(tmp_ / "model", tmp_ / "data.jsonl", tmp_ / out, keys);
  }
  // exec.host_memory_gb `below` bytes below what the host placement needs:
  // auto puts some stages (not all) on disk.
  std::string small_cap(const TrainConfig& host, int64_t below = 30000) const {
    const auto model = models::ModelConfig::from_file(tmp_ / "model" / "config.json");
    const int64_t h = resolve_run(host, model).budget.bytes(exec::MemorySpace::Host);
    return fmt::format("exec.host_memory_gb={:.17g}", static_cast<double>(h - below) / 1e9);
  }
  static int disk_stages(const TrainConfig& c) {
    const auto model = models::ModelConfig::from_file(c.model.path + "/config.json");
    const auto& on_disk = resolve_run(c, model).sizes.states_on_disk;
    return static_cast<int>(std::count(on_disk.begin(), on_disk.end(), true));
  }
  void expect_as_host(const TrainConfig& host, const TrainConfig& c);
  TempDir tmp_;
};

// Trains `c` (2 steps, some stages on disk) and resumes it to step 4; its
// checkpoints, held-out losses and losses are the host run `host`'s.
void StagedCheckpoint::expect_as_host(const TrainConfig& host, const TrainConfig& c) {
  const auto want = read_metrics(host.out.dir);
  ASSERT_EQ(want.size(), 4u);
  const int on_disk = disk_stages(c);
  EXPECT_GT(on_disk, 0);
  EXPECT_EQ(on_disk == kBlocks + 2, c.exec.state_placement == "disk");
  train_quietly(c);
  // The checkpoint at step 2 is the host run's, byte for byte.
  const fs::path mine = fs::path(c.out.dir) / "step-2";
  const fs::path theirs = fs::path(host.out.dir) / "step-2";
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "config.json"})
    EXPECT_TRUE(read_text(mine / file) == read_text(theirs / file)) << file;
  // The held-out loss at step 2, bit for bit.
  auto got = read_metrics(c.out.dir);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(got[1].contains("eval_loss"));
  EXPECT_EQ(got[1]["eval_loss"].get<double>(), want[1]["eval_loss"].get<double>());
  // No scratch file outlives the run.
  for (const auto& e : fs::directory_iterator(c.out.dir))
    EXPECT_NE(e.path().filename().string().rfind("lazytrain_states_", 0), 0u) << e.path();
  // Resumed to step 4 with the states on disk: the uninterrupted run's
  // losses, and its checkpoint and held-out loss at step 4.
  TrainConfig longer = c;
  longer.train.steps = 4;
  train_quietly(longer, mine.string());
  got = read_metrics(c.out.dir);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(field(got, "loss"), field(want, "loss"));
  EXPECT_EQ(field(got, "grad_norm"), field(want, "grad_norm"));
  EXPECT_EQ(got[3]["eval_loss"].get<double>(), want[3]["eval_loss"].get<double>());
  // The executor got the placement: the disk stages' masters and states
  // are in the file from a step's start, not in host memory.
  EXPECT_LT(got[3]["peak_bytes"]["host"].get<int64_t>(),
            want[3]["peak_bytes"]["host"].get<int64_t>());
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(read_text(fs::path(c.out.dir) / "step-4" / file) ==
                read_text(fs::path(host.out.dir) / "step-4" / file))
        << file;
}

TEST_F(StagedCheckpoint, SavesTheHostRunsFilesEvaluatesAndResumesAsIt) {
  for (const std::string optimizer : {"adamw", "adamw8bit"}) {
    SCOPED_TRACE(optimizer);
    const TrainConfig host = config("host_" + optimizer, optimizer, "host", 4);
    train_quietly(host);
    const TrainConfig capped = config("auto_" + optimizer, optimizer, "auto", 2, {small_cap(host)});
    for (const TrainConfig& c : {config("disk_" + optimizer, optimizer, "disk", 2), capped}) {
      SCOPED_TRACE(c.exec.state_placement);
      expect_as_host(host, c);
    }
  }
}

TEST_F(StagedCheckpoint, OffloadAndZenFlowSaveEvaluateAndResumeAsTheHostRun) {
  for (const std::string mode : {"offload", "zenflow"}) {
    for (const std::string optimizer : {"adamw", "adamw8bit"}) {
      SCOPED_TRACE(mode + " " + optimizer);
      const std::string tag = mode + "_" + optimizer;
      const TrainConfig host = config("host_" + tag, optimizer, "host", 4, {}, mode);
      train_quietly(host);
      // One byte below the host placement: the fewest stages that fit.
      const TrainConfig capped =
          config("auto_" + tag, optimizer, "auto", 2, {small_cap(host, 1)}, mode);
      for (const TrainConfig& c : {config("disk_" + tag, optimizer, "disk", 2, {}, mode), capped}) {
        SCOPED_TRACE(c.exec.state_placement);
        expect_as_host(host, c);
      }
    }
  }
}

}  // namespace
}  // namespace lt::train::testing
