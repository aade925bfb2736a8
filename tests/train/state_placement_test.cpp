// exec.state_placement reaches the streaming executor from a run's config:
// with disk, a run's losses are the host-placed run's bit for bit (the
// executor's own tests check weights and states, tests/exec/
// streaming_states_test.cpp) while the host holds 12 bytes a parameter less
// at its peak (the f32 master, m and v of all but the stages in flight:
// adamw), and the run plan counts them on disk. An executor other than
// streaming refuses the key, naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/errors.h"
#include "train/run_plan.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class StatePlacement : public ::testing::Test {
 protected:
  // The llama fixture's shape with 12 blocks (random weights): at most
  // three stages' states are in host memory at once, so a model of a few
  // stages would hold them all anyway.
  StatePlacement() : tmp_("state_placement") {
    write_random_tokens(tmp_ / "data.jsonl", 16, 97, 3);
    nlohmann::json c = nlohmann::json::parse(read_text(fixture("llama") / "config.json"));
    c["num_hidden_layers"] = 12;
    std::filesystem::create_directories(tmp_ / "model");
    write_text(tmp_ / "model" / "config.json", c.dump());
  }
  TrainConfig config(const std::string& placement, const std::string& mode = "streaming") {
    return fixture_config(tmp_ / "model", tmp_ / "data.jsonl", tmp_ / ("out_" + placement),
                          {"model.init=random", "train.steps=4", "train.batch_size=4",
                           "exec.mode=" + mode, "exec.state_placement=" + placement});
  }
  models::ModelConfig model() const {
    return models::ModelConfig::from_file(tmp_ / "model" / "config.json");
  }
  TempDir tmp_;
};

TEST_F(StatePlacement, DiskTrainsAsHostWithLessHostMemory) {
  train_quietly(config("host"));
  train_quietly(config("disk"));
  const auto host = read_metrics(tmp_ / "out_host"), disk = read_metrics(tmp_ / "out_disk");
  ASSERT_EQ(host.size(), 4u);
  ASSERT_EQ(disk.size(), 4u);
  EXPECT_EQ(field(host, "loss"), field(disk, "loss"));
  EXPECT_EQ(field(host, "grad_norm"), field(disk, "grad_norm"));
  // From the second step on, every stage's states have gone to disk.
  const int64_t host_peak = host[3]["peak_bytes"]["host"].get<int64_t>();
  const int64_t disk_peak = disk[3]["peak_bytes"]["host"].get<int64_t>();
  EXPECT_LT(disk_peak, host_peak) << "exec.state_placement disk did not reach the executor";
}

TEST_F(StatePlacement, ThePlanCountsTheStatesOnDisk) {
  const RunPlan host = resolve_run(config("host"), model());
  const RunPlan disk = resolve_run(config("disk"), model());
  EXPECT_GT(disk.budget.bytes(exec::MemorySpace::Disk), host.budget.bytes(exec::MemorySpace::Disk));
  EXPECT_LT(disk.budget.bytes(exec::MemorySpace::Host), host.budget.bytes(exec::MemorySpace::Host));
}

TEST_F(StatePlacement, OtherExecutorsRefuseDisk) {
  EXPECT_THAT(lt::testing::error_of([&] { resolve_run(config("disk", "resident"), model()); }),
              ::testing::HasSubstr("exec.state_placement: disk"));
}

}  // namespace
}  // namespace lt::train::testing
