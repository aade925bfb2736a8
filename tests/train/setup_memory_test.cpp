// Building a run whose stages keep their masters and optimizer states on
// disk (exec.state_placement) makes each disk stage's optimizer states a
// stage at a time as the executor writes them out (Note [Stage states on
// disk], "the start"): the host memory that setting up the run holds at its
// peak stays below the masters and states of every stage together (12
// bytes a parameter with adamw), which building every state first, as the
// start did before, exceeds by itself. And the run's losses are the
// host-placed run's bit for bit, from random weights and from a checkpoint
// folder, with every stage on disk or the stages auto puts there under a
// small exec.host_memory_gb, for adamw and adamw8bit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "core/random.h"
#include "io/hf_model.h"
#include "train/run_plan.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class SetupMemory : public ::testing::Test {
 protected:
  // The llama fixture's shape with 12 blocks: most of its parameters are
  // in the blocks, so one or two stages in flight are a small part.
  SetupMemory() : tmp_("setup_memory") {
    write_random_tokens(tmp_ / "data.jsonl", 16, 97, 3);
    write_fixture_config(tmp_ / "random", "llama", 12);
    Generator gen(11);
    const auto config = models::ModelConfig::from_file(tmp_ / "random" / "config.json");
    io::save_hf_model(models::CausalLM::random(config, gen, DType::F32), tmp_ / "saved",
                      DType::F32);
  }
  TrainConfig config(const std::string& model, const std::string& placement,
                     const std::vector<std::string>& more) {
    std::vector<std::string> keys = {
        "model.init=" + std::string(model == "random" ? "random" : "pretrained"), "train.steps=3",
        "train.batch_size=4", "exec.mode=streaming", "exec.state_placement=" + placement};
    keys.insert(keys.end(), more.begin(), more.end());
    const std::string out = fmt::format("out_{}_{}_{}", model, placement, runs_++);
    return fixture_config(tmp_ / model, tmp_ / "data.jsonl", tmp_ / out, keys);
  }
  int64_t parameters() const {
    return models::ModelConfig::from_file(tmp_ / "random" / "config.json").num_parameters();
  }
  TempDir tmp_;
  int runs_ = 0;
};

// exec.host_memory_gb for exactly `bytes`.
std::string host_cap(int64_t bytes) {
  return fmt::format("exec.host_memory_gb={:.17g}", static_cast<double>(bytes) / 1e9);
}

TEST_F(SetupMemory, DiskStagesStartWithinTheirPlacementAndTrainAsHost) {
  const int64_t all_masters_and_states = 12 * parameters();  // adamw: f32 master, m, v
  for (const std::string model : {"random", "saved"}) {
    SCOPED_TRACE(model);
    const TrainConfig host = config(model, "host", {});
    const TrainRunResult host_run = train_quietly(host);
    // The host placement builds them all: the reference the bound means.
    EXPECT_GT(host_run.setup_host_peak_bytes, all_masters_and_states);
    const auto host_losses = field(read_metrics(host.out.dir), "loss");
    ASSERT_EQ(host_losses.size(), 3u);

    const TrainConfig disk = config(model, "disk", {});
    const TrainRunResult disk_run = train_quietly(disk);
    EXPECT_EQ(field(read_metrics(disk.out.dir), "loss"), host_losses);
    EXPECT_LT(disk_run.setup_host_peak_bytes, all_masters_and_states)
        << "building the run held every stage's states at once";

    // auto under a cap: some stages on disk (the state placement tests
    // check which), the same losses, a lower start than the host's.
    const auto shape = models::ModelConfig::from_file(tmp_ / "random" / "config.json");
    const int64_t H = resolve_run(host, shape).budget.bytes(exec::MemorySpace::Host);
    const TrainConfig capped = config(model, "auto", {host_cap(H - 14 * 11568)});
    const std::vector<bool> on_disk = resolve_run(capped, shape).sizes.states_on_disk;
    ASSERT_EQ(std::count(on_disk.begin(), on_disk.end(), true), 5);
    const TrainRunResult capped_run = train_quietly(capped);
    EXPECT_EQ(field(read_metrics(capped.out.dir), "loss"), host_losses);
    EXPECT_LT(capped_run.setup_host_peak_bytes, host_run.setup_host_peak_bytes);
  }
}

TEST_F(SetupMemory, AdamW8bitStatesMadeOnDiskTrainAsHost) {
  const std::vector<std::string> q8 = {"optim.name=adamw8bit", "optim.min_8bit_numel=64",
                                       "optim.block_size=32"};
  const TrainConfig host = config("random", "host", q8);
  const TrainConfig disk = config("random", "disk", q8);
  train_quietly(host);
  train_quietly(disk);
  const auto host_losses = field(read_metrics(host.out.dir), "loss");
  ASSERT_EQ(host_losses.size(), 3u);
  EXPECT_EQ(field(read_metrics(disk.out.dir), "loss"), host_losses);
}

}  // namespace
}  // namespace lt::train::testing
