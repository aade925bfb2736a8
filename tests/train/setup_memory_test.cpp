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
//
// The masters likewise (StreamedMasters below): the plan is resolved from
// config.json first and the disk stages' masters are loaded a stage at a
// time as the executor writes them out, from random init, from a sharded
// safetensors folder, and from a checkpoint on resume; each run trains as
// the host-placed run: the same losses and checkpoint files, byte for byte;
// and with the stand-in's slabs and upload copies counted apart (as a GPU's
// pinned memory), the setup's host peak stays below every master together
// (tests/exec/states_made_on_disk_test.cpp counts the executor's part,
// tests/gpu/setup_memory_gpu_test.cpp the trainer's on a GPU).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "core/random.h"
#include "io/hf_model.h"
#include "train/run_plan.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class SetupMemory : public ::testing::Test {
 protected:
  // The llama fixture's shape with 12 blocks: most of its parameters are
  // in the blocks, so one or two stages in flight are a small part. Saved
  // in shards of ~64 KB (a model.safetensors.index.json).
  SetupMemory() : tmp_("setup_memory") {
    write_random_tokens(tmp_ / "data.jsonl", 16, 97, 3);
    write_fixture_config(tmp_ / "random", "llama", 12);
    Generator gen(11);
    const auto config = models::ModelConfig::from_file(tmp_ / "random" / "config.json");
    io::HfWriteOptions sharded;
    sharded.max_shard_bytes = 64 << 10;
    io::save_hf_model(models::CausalLM::random(config, gen, DType::F32), tmp_ / "saved", DType::F32,
                      sharded);
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
  // exec.host_memory_gb under which auto puts 5 of the 14 stages on disk.
  std::string small_host(const TrainConfig& host) const {
    const auto shape = models::ModelConfig::from_file(tmp_ / "random" / "config.json");
    const int64_t bytes = resolve_run(host, shape).budget.bytes(exec::MemorySpace::Host);
    return fmt::format("exec.host_memory_gb={:.17g}",
                       static_cast<double>(bytes - 14 * 11568) / 1e9);
  }
  int64_t parameters() const {
    return models::ModelConfig::from_file(tmp_ / "random" / "config.json").num_parameters();
  }
  TempDir tmp_;
  int runs_ = 0;
};

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
    const TrainConfig capped = config(model, "auto", {small_host(host)});
    const auto shape = models::ModelConfig::from_file(tmp_ / "random" / "config.json");
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

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every safetensors file and index of checkpoint `dir`, by name.
std::map<std::string, std::string> weight_files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.find(".safetensors") != std::string::npos) out[name] = file_bytes(e.path());
  }
  return out;
}

// With the stand-in's slabs and upload copies counted apart (as a GPU's
// pinned memory is), setting up a run with every stage on disk holds less
// host memory than the masters of every stage together: about one stage's
// masters and states in flight. The host placement holds them all, and so
// did the disk placement when every master was loaded first.
TEST_F(SetupMemory, StreamedMastersStartBelowEveryMasterWithThePinnedMemoryApart) {
  const int64_t all_masters = 4 * parameters();
  TrainRunOptions pinned_apart;
  pinned_apart.sample_at_end = false;
  pinned_apart.stand_in_pinned_apart = true;
  for (const std::string model : {"random", "saved"}) {
    SCOPED_TRACE(model);
    const TrainConfig host = config(model, "host", {});
    const TrainConfig disk = config(model, "disk", {});
    EXPECT_GT(run_training(host, pinned_apart).setup_host_peak_bytes, all_masters);
    const int64_t peak = run_training(disk, pinned_apart).setup_host_peak_bytes;
    EXPECT_LT(peak, all_masters) << "the start held every master";
    EXPECT_EQ(field(read_metrics(disk.out.dir), "loss"), field(read_metrics(host.out.dir), "loss"));
  }
}

// The run's log (stderr) and its result.
TrainRunResult train_logged(const TrainConfig& c, std::string& log,
                            const std::string& resume = "") {
  ::testing::internal::CaptureStderr();
  TrainRunResult r;
  try {
    r = train_quietly(c, resume);
  } catch (...) {
    log = ::testing::internal::GetCapturedStderr();
    throw;
  }
  log = ::testing::internal::GetCapturedStderr();
  return r;
}

TEST_F(SetupMemory, StreamedMastersFromRandomAndShardedSafetensorsTrainAsHostToTheByte) {
  for (const std::string model : {"random", "saved"}) {
    for (const std::string optim : {"adamw", "adamw8bit"}) {
      SCOPED_TRACE(model + ", " + optim);
      const std::vector<std::string> keys = {"optim.name=" + optim, "optim.min_8bit_numel=64",
                                             "optim.block_size=32"};
      const TrainConfig host = config(model, "host", keys);
      std::string log;
      train_logged(host, log);
      EXPECT_EQ(log.find("as the run writes them out"), std::string::npos) << log;
      const auto want = field(read_metrics(host.out.dir), "loss");
      ASSERT_EQ(want.size(), 3u);
      const auto want_files = weight_files(fs::path(host.out.dir) / "step-3");
      ASSERT_GE(want_files.size(), 2u);  // the model's and optimizer.safetensors

      std::vector<std::string> capped = keys;
      capped.push_back(small_host(host));
      for (const TrainConfig& placed :
           {config(model, "disk", keys), config(model, "auto", capped)}) {
        SCOPED_TRACE(placed.exec.state_placement);
        train_logged(placed, log);
        EXPECT_NE(log.find("as the run writes them out"), std::string::npos) << log;
        EXPECT_EQ(field(read_metrics(placed.out.dir), "loss"), want);
        EXPECT_TRUE(weight_files(fs::path(placed.out.dir) / "step-3") == want_files);
      }
    }
  }
}

TEST_F(SetupMemory, StreamedMastersOfAResumeComeFromTheCheckpointAStageAtATime) {
  const std::vector<std::string> four = {"train.steps=4", "train.save_every=2"};
  const TrainConfig host = config("random", "host", four);
  train_quietly(host);
  const auto want = field(read_metrics(host.out.dir), "loss");
  ASSERT_EQ(want.size(), 4u);
  for (const std::string placement : {"disk", "auto"}) {
    SCOPED_TRACE(placement);
    std::vector<std::string> keys = four;
    if (placement == "auto") keys.push_back(small_host(host));
    const TrainConfig resumed = config("random", placement, keys);
    std::string log;
    train_logged(resumed, log, (fs::path(host.out.dir) / "step-2").string());
    EXPECT_NE(log.find("loaded from " + (fs::path(host.out.dir) / "step-2").string() +
                       " (the stages on disk as the run writes them out)"),
              std::string::npos)
        << log;
    EXPECT_EQ(field(read_metrics(resumed.out.dir), "loss"),
              std::vector<double>(want.begin() + 2, want.end()));
    EXPECT_TRUE(weight_files(fs::path(resumed.out.dir) / "step-4") ==
                weight_files(fs::path(host.out.dir) / "step-4"));
  }
}

}  // namespace
}  // namespace lt::train::testing
