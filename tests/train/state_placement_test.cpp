// exec.state_placement reaches the streaming executor from a run's config:
// with disk, a run's losses are the host-placed run's bit for bit (the
// executor's own tests check weights and states, tests/exec/
// streaming_states_test.cpp) while the host holds 12 bytes a parameter less
// at its peak (the f32 master, m and v of all but the stages in flight:
// adamw), and the run plan counts them on disk, for streaming and for the
// offload executors. The resident executor refuses the key, naming it.
//
// auto under exec.host_memory_gb: a cap below what the host placement
// needs moves the fewest blocks to disk (a count worked out by hand from
// the fixture's shape) and trains with the host run's losses bit for bit;
// a cap that fits keeps everything in host memory; a cap that even every
// stage on disk exceeds stops the run naming the key.
//
// A disk that refuses the states' writes stops the run naming the scratch
// file and the error, with the checkpoint it resumed from untouched, and a
// later resume continues as the uninterrupted run.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "support/errors.h"
#include "support/file_size_limit.h"
#include "train/run_plan.h"
#include "train/schedule_auto.h"
#include "train/state_placement.h"
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
    write_fixture_config(tmp_ / "model", "llama", 12);
  }
  TrainConfig config(const std::string& placement, const std::string& mode = "streaming",
                     const std::vector<std::string>& more = {}) {
    std::vector<std::string> keys = {"model.init=random", "train.steps=4", "train.batch_size=4",
                                     "exec.mode=" + mode, "exec.state_placement=" + placement};
    keys.insert(keys.end(), more.begin(), more.end());
    return fixture_config(tmp_ / "model", tmp_ / "data.jsonl",
                          tmp_ / ("out_" + placement + std::to_string(more.size())), keys);
  }
  // exec.host_memory_gb for exactly `bytes`.
  static std::string host_cap(int64_t bytes) {
    return fmt::format("exec.host_memory_gb={:.17g}", static_cast<double>(bytes) / 1e9);
  }
  static int disk_stages(const RunPlan& p) {
    return static_cast<int>(
        std::count(p.sizes.states_on_disk.begin(), p.sizes.states_on_disk.end(), true));
  }
  models::ModelConfig model() const {
    return models::ModelConfig::from_file(tmp_ / "model" / "config.json");
  }
  TempDir tmp_;
};

TEST_F(StatePlacement, DiskTrainsAsHostWithLessHostMemory) {
  train_quietly(config("host"));
  train_quietly(config("disk"));
  const auto host = read_metrics(tmp_ / "out_host0"), disk = read_metrics(tmp_ / "out_disk0");
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

// data.eval_task math reads the whole model back into host memory: refused
// (so skipped by the trainer) when the stages went to disk because the
// whole model is over the host cap, and allowed when disk was asked for
// with room to spare, or nothing is on disk.
TEST_F(StatePlacement, TheWholeModelComesBackOnlyWhenItFitsTheHost) {
  const int64_t H = resolve_run(config("host"), model()).budget.bytes(exec::MemorySpace::Host);
  const RunPlan capped = resolve_run(config("auto", "streaming", {host_cap(H - 1)}), model());
  ASSERT_GT(disk_stages(capped), 0);
  EXPECT_THAT(whole_model_read_back_refusal(capped, model()),
              ::testing::HasSubstr("stages' master weights and optimizer states are on disk"));
  const RunPlan roomy = resolve_run(config("disk", "streaming", {host_cap(2 * H)}), model());
  ASSERT_GT(disk_stages(roomy), 0);
  EXPECT_EQ(whole_model_read_back_refusal(roomy, model()), "");
  EXPECT_EQ(whole_model_read_back_refusal(resolve_run(config("host"), model()), model()), "");
  // Offload evaluates and generates from the device's weights: nothing
  // comes back, whatever is on disk (its plan has no streaming schedule,
  // which the count above would have refused: the demo's `exec.mode
  // offload` with `exec.state_placement disk` stopped at set-up so).
  for (const char* mode : {"offload", "zenflow"}) {
    const RunPlan offload = resolve_run(config("disk", mode, {host_cap(2 * H)}), model());
    ASSERT_GT(disk_stages(offload), 0) << mode;
    EXPECT_EQ(whole_model_read_back_refusal(offload, model()), "") << mode;
  }
}

TEST_F(StatePlacement, OtherExecutorsRefuseDisk) {
  EXPECT_THAT(lt::testing::error_of([&] { resolve_run(config("disk", "resident"), model()); }),
              ::testing::HasSubstr("exec.state_placement: disk"));
}

// `lazytrain plan --config --json` says which stages' states are on disk
// and what the disk moves a step: with auto under the H - 14e cap of the
// test below, blocks 7..11 (stages 8..12), each read and written once:
// 12 bytes a parameter (adamw).
TEST_F(StatePlacement, PlanJsonSaysWhichStagesAreOnDisk) {
  const int64_t e = 11568;
  const int64_t H = resolve_run(config("host"), model()).budget.bytes(exec::MemorySpace::Host);
  const fs::path yaml = tmp_ / "run.yaml";
  write_text(yaml, config("auto", "streaming", {host_cap(H - 14 * e)}).to_yaml());
  std::string output;
  ASSERT_EQ(run_program({"plan", "--config", yaml.string(), "--json"}, tmp_ / "plan.log", &output),
            0)
      << output;
  const auto j = nlohmann::json::parse(output.substr(output.find('{'))).at("states_on_disk");
  EXPECT_EQ(j.at("stages"), nlohmann::json::parse("[8, 9, 10, 11, 12]"));
  EXPECT_EQ(j.at("read_bytes_per_step").get<int64_t>(), 5 * e * 12);
  EXPECT_EQ(j.at("write_bytes_per_step").get<int64_t>(), 5 * e * 12);
}

// The offload executors (exec.mode offload, zenflow) count a disk stage's
// master and states on disk as streaming does (adamw: 12 bytes a
// parameter), say so in the plan's reasons and in `lazytrain plan --json`.
TEST_F(StatePlacement, OffloadPlansShowThePlacement) {
  const int64_t n = model().num_parameters();
  for (const char* mode : {"offload", "zenflow"}) {
    SCOPED_TRACE(mode);
    const RunPlan host = resolve_run(config("host", mode), model());
    const RunPlan disk = resolve_run(config("disk", mode), model());
    EXPECT_EQ(host.budget.bytes(exec::MemorySpace::Disk), 0);
    EXPECT_EQ(disk.budget.bytes(exec::MemorySpace::Disk), 12 * n);
    EXPECT_LT(disk.budget.bytes(exec::MemorySpace::Host),
              host.budget.bytes(exec::MemorySpace::Host));
    EXPECT_EQ(disk.state_traffic.read_bytes, 12 * n);
    // The synchronous step waits for the disk: at the default profile's
    // 1 GB/s each way it moves 24 bytes a parameter, and the updates (4.56 G
    // parameters/s) are so much faster that it never waits for one, so the
    // step's update phase is the disk's time instead of the updates' own.
    // ZenFlow's window is not predicted.
    EXPECT_EQ(host.predicted_state_disk_s, 0);
    if (std::string(mode) == "offload") {
      EXPECT_NEAR(disk.predicted_state_disk_s, 24.0 * n / 1e9 - n / 4.56e9, 1e-12);
    } else {
      EXPECT_EQ(disk.predicted_state_disk_s, 0);
    }
    bool said = false;
    for (const std::string& line : disk.reasons)
      said = said || line.find("14 of 14 stages on disk") != std::string::npos;
    EXPECT_TRUE(said) << ::testing::PrintToString(disk.reasons);
    const fs::path yaml = tmp_ / "run.yaml";
    write_text(yaml, config("disk", mode).to_yaml());
    std::string output;
    ASSERT_EQ(
        run_program({"plan", "--config", yaml.string(), "--json"}, tmp_ / "plan.log", &output), 0)
        << output;
    const auto j = nlohmann::json::parse(output.substr(output.find('{'))).at("states_on_disk");
    EXPECT_EQ(j.at("stages").size(), 14u);
    EXPECT_EQ(j.at("write_bytes_per_step").get<int64_t>(), 12 * n);
    EXPECT_EQ(j.at("predicted_exposed_s").get<double>(), disk.predicted_state_disk_s);
  }
}

// The fixture's block has e = 11568 parameters (tests/exec/
// streaming_states_test.cpp counts them); the head 4704 and the embedding
// 4656 are smaller. On the CPU stand-in a stage moved to disk takes its f32
// master, m and v (12e) off the host count and trades its bf16 upload count
// (2e) for an f32 copy (4e), but the three largest disk stages come back in
// flight (12e each). So, against H (the host placement's host bytes), k
// blocks on disk need H + 2e k for k <= 3 and H + 6e - 10e (k - 3) after:
// a cap of H - 1 takes 4 blocks, H - 14e takes 5.
TEST_F(StatePlacement, AutoMovesTheFewestBlocksBelowTheHostCap) {
  const int64_t e = 11568;
  const int64_t H = resolve_run(config("host"), model()).budget.bytes(exec::MemorySpace::Host);
  const RunPlan four = resolve_run(config("auto", "streaming", {host_cap(H - 1)}), model());
  EXPECT_EQ(disk_stages(four), 4);
  EXPECT_EQ(four.budget.bytes(exec::MemorySpace::Host), H - 4 * e);
  const RunPlan five = resolve_run(config("auto", "streaming", {host_cap(H - 14 * e)}), model());
  EXPECT_EQ(disk_stages(five), 5);
  EXPECT_EQ(five.budget.bytes(exec::MemorySpace::Host), H - 14 * e);
  // The last blocks go first: stages 8..12 are blocks 7..11.
  for (int stage = 0; stage < 14; ++stage)
    EXPECT_EQ(five.sizes.states_on_disk[static_cast<size_t>(stage)], stage >= 8 && stage <= 12)
        << stage;
  // The plan says where they live and what the disk moves a step.
  bool said = false;
  for (const std::string& line : five.reasons)
    said =
        said || (line.find("5 of 14 stages on disk (block 7 .. block 11)") != std::string::npos &&
                 line.find("per step the disk reads") != std::string::npos);
  EXPECT_TRUE(said) << ::testing::PrintToString(five.reasons);
  EXPECT_EQ(five.state_traffic.read_bytes, 5 * e * 12);
  // Every stage on disk: no "rest in host memory" (it said "4 of 4 ...,
  // the rest in host memory").
  const RunPlan all = resolve_run(config("disk"), model());
  const std::string all_reasons = ::testing::PrintToString(all.reasons);
  EXPECT_MENTIONS(all_reasons,
                  "master weights and optimizer states: all 14 stages on disk (embed "
                  ".. head); per step the disk reads");
  EXPECT_MENTIONS(all_reasons, "(the default disk rates)");
  // None on disk: no disk rates to name (it added "(the default disk rates)").
  const RunPlan none = resolve_run(config("host"), model());
  EXPECT_NE(std::find(none.reasons.begin(), none.reasons.end(),
                      "master weights and optimizer states: all in host memory"),
            none.reasons.end())
      << ::testing::PrintToString(none.reasons);
}

// The disk-short message's part on the checkpoints, by hand: said with the
// key that sets their share (it said "none on a tmpfs" of any disk that
// kept nothing for them, and "a lower train.keep_last" where the saves
// left, not keep_last, set it).
TEST(DiskShortOfCheckpoints, SaysWhatSetsTheCheckpointsShare) {
  TrainConfig c;
  c.train.keep_last = 2;
  FreeMemory room;
  EXPECT_EQ(disk_short_of_checkpoints(c, room), "");
  room.disk_is_host_memory = true;
  EXPECT_EQ(disk_short_of_checkpoints(c, room),
            " (a tmpfs is host memory: no disk for them there)");
  room = FreeMemory{};
  room.disk_free = 40'000'000'000;
  room.disk_kept_for_checkpoints = 57'000'000'000;
  room.checkpoints_kept_for = 3;
  room.checkpoints_kept_by_keep_last = true;
  EXPECT_EQ(disk_short_of_checkpoints(c, room),
            " once the run's checkpoints have their room: the file system has 40 GB "
            "(40000000000 bytes) free, and the checkpoints this run writes to out.dir take up to "
            "57 GB (57000000000 bytes) (3 more of 19 GB (19000000000 bytes) each: train.keep_last "
            "2 and the one being written, less those there now); a lower train.keep_last, or "
            "optim.name adamw8bit (smaller states), leaves more");
  room.checkpoints_kept_for = 1;
  room.disk_kept_for_checkpoints = 19'000'000'000;
  room.checkpoints_kept_by_keep_last = false;
  c.optim.name = "adamw8bit";
  EXPECT_EQ(disk_short_of_checkpoints(c, room),
            " once the run's checkpoints have their room: the file system has 40 GB "
            "(40000000000 bytes) free, and the checkpoints this run writes to out.dir take up to "
            "19 GB (19000000000 bytes) (1 more of 19 GB (19000000000 bytes) each, one per save "
            "the run has left)");
}

TEST_F(StatePlacement, AutoBelowTheHostCapTrainsAsHostBitForBit) {
  const int64_t e = 11568;
  const int64_t H = resolve_run(config("host"), model()).budget.bytes(exec::MemorySpace::Host);
  const TrainConfig capped = config("auto", "streaming", {host_cap(H - 14 * e)});
  ASSERT_EQ(disk_stages(resolve_run(capped, model())), 5);
  train_quietly(config("host"));
  train_quietly(capped);
  const auto host = read_metrics(tmp_ / "out_host0"), disk = read_metrics(tmp_ / "out_auto1");
  ASSERT_EQ(host.size(), 4u);
  ASSERT_EQ(disk.size(), 4u);
  EXPECT_EQ(field(host, "loss"), field(disk, "loss"));
  EXPECT_EQ(field(host, "grad_norm"), field(disk, "grad_norm"));
}

TEST_F(StatePlacement, AutoThatFitsStaysInHostMemory) {
  const int64_t H = resolve_run(config("host"), model()).budget.bytes(exec::MemorySpace::Host);
  const RunPlan fits = resolve_run(config("auto", "streaming", {host_cap(H)}), model());
  EXPECT_EQ(disk_stages(fits), 0);
  EXPECT_EQ(fits.budget.bytes(exec::MemorySpace::Host), H);
  EXPECT_EQ(fits.budget.bytes(exec::MemorySpace::Disk), 0);
  // And without a cap, this machine has far more free than the fixture needs.
  EXPECT_EQ(disk_stages(resolve_run(config("auto"), model())), 0);
}

TEST_F(StatePlacement, ACapTooSmallEvenForDiskNamesTheKey) {
  for (const char* placement : {"auto", "disk"}) {
    const std::string e = lt::testing::error_of(
        [&] { resolve_run(config(placement, "streaming", {host_cap(1000)}), model()); });
    EXPECT_THAT(e, ::testing::HasSubstr("exec.host_memory_gb"));
    EXPECT_THAT(e, ::testing::HasSubstr("even with every stage's master weights and optimizer "
                                        "states on disk"));
    EXPECT_THAT(e, ::testing::HasSubstr("more than exec.host_memory_gb (1e-06 GB)"));
  }
  // The offload executors place their states as streaming does
  // (tests/train/offload_states_test.cpp): the same message.
  for (const char* mode : {"offload", "zenflow"}) {
    const std::string e = lt::testing::error_of(
        [&] { resolve_run(config("auto", mode, {host_cap(1000)}), model()); });
    EXPECT_THAT(e, ::testing::HasSubstr("exec.host_memory_gb"));
    EXPECT_THAT(e, ::testing::HasSubstr("even with every stage's master weights and optimizer "
                                        "states on disk"));
  }
  const int64_t offload_host =
      resolve_run(config("auto", "offload"), model()).budget.bytes(exec::MemorySpace::Host);
  EXPECT_NO_THROW(resolve_run(config("auto", "offload", {host_cap(offload_host)}), model()));
  // host with a cap it exceeds says to move states to disk.
  EXPECT_THAT(lt::testing::error_of(
                  [&] { resolve_run(config("host", "streaming", {host_cap(1000)}), model()); }),
              ::testing::HasSubstr("set exec.state_placement: auto"));
}

// Every file under `dir` and its bytes.
std::map<std::string, std::string> files_of(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = read_text(e.path());
  return out;
}

// RLIMIT_FSIZE between a checkpoint's largest file and the states' scratch
// file (12 bytes a parameter with adamw, every stage on disk) is what a
// full disk looks like to the run: the resumed run's first step, which
// writes every stage's states out, fails. Nothing is lost: the checkpoint
// is as it was, no scratch file stays, and a resume without the limit
// (after a killed run's stale scratch file, which it removes) gives the
// uninterrupted run's losses bit for bit.
TEST_F(StatePlacement, AFullDiskStopsTheRunAndLosesNothing) {
  const fs::path out = tmp_ / "out_full";
  const auto run = [&](int steps) {
    return fixture_config(
        tmp_ / "model", tmp_ / "data.jsonl", out,
        {"model.init=random", "train.steps=" + std::to_string(steps), "train.batch_size=4",
         "exec.mode=streaming", "exec.state_placement=disk"});
  };
  train_quietly(config("host"));  // the uninterrupted run: 4 steps
  const std::vector<double> want = field(read_metrics(tmp_ / "out_host0"), "loss");
  train_quietly(run(2));
  const fs::path saved = out / "step-2";
  ASSERT_TRUE(fs::is_directory(saved));
  const auto before = files_of(saved);
  size_t largest = 0;
  for (const auto& [name, bytes] : before) largest = std::max(largest, bytes.size());
  const int64_t scratch = 12 * model().num_parameters();
  ASSERT_LT(static_cast<int64_t>(largest), scratch);

  std::string e;
  {
    // On a 4 KiB boundary: an O_DIRECT write cut at an unaligned limit
    // fails with EINVAL instead (a real disk fills in whole blocks).
    const lt::testing::FileSizeLimit limit(
        static_cast<rlim_t>((static_cast<int64_t>(largest) + scratch) / 2 / 4096 * 4096));
    e = lt::testing::error_of([&] { train_quietly(run(4), "latest"); });
  }
  EXPECT_THAT(e, ::testing::HasSubstr(out.string()));
  EXPECT_THAT(e, ::testing::HasSubstr("lazytrain_states_"));
  EXPECT_THAT(e, ::testing::HasSubstr("File too large"));

  EXPECT_EQ(files_of(saved), before) << "the checkpoint changed";
  for (const auto& entry : fs::directory_iterator(out))
    EXPECT_EQ(entry.path().filename().string().rfind("lazytrain_states_", 0), std::string::npos)
        << entry.path();
  write_text(out / "lazytrain_states_killed", "a killed run's scratch file");
  train_quietly(run(4), "latest");
  EXPECT_FALSE(fs::exists(out / "lazytrain_states_killed"));
  EXPECT_EQ(field(read_metrics(out), "loss"), want);
}

// Ctrl-C with every stage's states on disk: the step in flight finishes,
// the states come back for the checkpoint, the run exits 0 and leaves no
// scratch file; the resume rebuilds it from the checkpoint and goes on.
TEST_F(StatePlacement, SigintSavesFromDiskAndLeavesNoScratchFile) {
  for (const std::string mode : {"streaming", "offload", "zenflow"}) {
    SCOPED_TRACE(mode);
    const fs::path out = tmp_ / ("out_sigint_" + mode);
    Child child({"train", "--no-sample",
                 "--set", "model.path=" + (tmp_ / "model").string(),
                 "--set", "model.init=random",
                 "--set", "data.path=" + (tmp_ / "data.jsonl").string(),
                 "--set", "data.format=tokens",
                 "--set", "train.steps=100000",
                 "--set", "train.batch_size=4",
                 "--set", "train.seq_len=16",
                 "--set", "train.device=cpu",
                 "--set", "exec.mode=" + mode,
                 "--set", "exec.state_placement=disk",
                 "--set", "out.dir=" + out.string()},
                tmp_ / ("sigint_" + mode + ".log"));
    ASSERT_TRUE(wait_for_lines(child, out / "metrics.jsonl", 2)) << child.output();
    child.signal(SIGINT);
    const int status = child.wait(60);
    const std::string output = child.output();
    ASSERT_TRUE(WIFEXITED(status)) << output;
    EXPECT_EQ(WEXITSTATUS(status), 0) << output;
    const size_t steps = read_metrics(out).size();
    ASSERT_TRUE(fs::is_directory(out / ("step-" + std::to_string(steps)))) << output;
    for (const auto& entry : fs::directory_iterator(out))
      EXPECT_EQ(entry.path().filename().string().rfind("lazytrain_states_", 0), std::string::npos)
          << entry.path();
    // The checkpoint's own config, two steps longer.
    const std::string saved = (out / ("step-" + std::to_string(steps))).string();
    const TrainConfig more =
        load_train_config_for("", {"train.steps=" + std::to_string(steps + 2)}, &saved);
    train_quietly(more, saved);
    const auto metrics = read_metrics(out);
    ASSERT_EQ(metrics.size(), steps + 2);
    for (const auto& m : metrics) EXPECT_TRUE(std::isfinite(m.at("loss").get<double>()));
  }
}

}  // namespace
}  // namespace lt::train::testing
