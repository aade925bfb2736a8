// What a user's mistakes over ranks are told: a key's error names the
// config file and line that set it, as one process's validation does (the
// ranks' checks named the key alone: a batch_size the ranks cannot share,
// a dist.zero from a checkpoint's train_config.yaml the user never wrote),
// and launch refuses the commands that know nothing of ranks (N copies of
// eval printed N results).
#include <gtest/gtest.h>

#include <string>

#include "dist/dist_runs.h"

namespace lt::train::testing {
namespace {

// run.yaml: the fixture's run on the CPU, `train_lines` at the end of its
// train section (from line 11), `extra` at the file's end (from line 13).
fs::path write_config(const Runs& runs, const std::string& train_lines, const std::string& extra) {
  const fs::path config = runs.tmp / "run.yaml";
  write_text(config, "model:\n  path: " + fixture("qwen3").string() +
                         "\n  init: pretrained\ndata:\n  path: " + runs.data.string() +
                         "\n  format: tokens\ntrain:\n  seq_len: 16\n  steps: 1\n  device: cpu\n" +
                         train_lines + "out:\n  dir: " + (runs.tmp / "out").string() + "\n" +
                         extra);
  return config;
}

std::string launch_fails(const Runs& runs, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"launch", "--nproc", "2"};
  all.insert(all.end(), args.begin(), args.end());
  std::string output;
  EXPECT_EQ(run_program(all, runs.tmp / "launch.log", &output, 120), 1) << output;
  return output;
}

TEST(RankErrors, ABatchTheRanksCannotShareNamesItsFileAndLine) {
  Runs runs;
  const fs::path config = write_config(runs, "  batch_size: 7\n", "exec:\n  mode: resident\n");
  EXPECT_MENTIONS(launch_fails(runs, {"train", config.string()}),
                  config.string() +
                      " (line 11): train.batch_size 7 is the global batch and must "
                      "divide by the world size 2");
  EXPECT_MENTIONS(launch_fails(runs, {"train", config.string(), "--set", "train.batch_size=9"}),
                  "--set train.batch_size=9: train.batch_size 9 is the global batch");
}

TEST(RankErrors, ZeroOneBesideResidentNamesWhereDistZeroWasSet) {
  Runs runs;
  const fs::path config = write_config(runs, "", "exec:\n  mode: resident\ndist:\n  zero: 1\n");
  EXPECT_MENTIONS(launch_fails(runs, {"train", config.string(), "--set", "train.batch_size=4"}),
                  config.string() +
                      " (line 16): config key 'dist.zero' 1 (ZeRO-1) needs "
                      "exec.mode offload or streaming");
}

TEST(RankErrors, LaunchRefusesCommandsOfOneProcess) {
  Runs runs;
  for (const char* command : {"eval", "generate", "convert", "tokenize", "profile", "info"}) {
    const std::string output = launch_fails(runs, {command, "--help"});
    EXPECT_MENTIONS(output, std::string("lazytrain launch: ") + command +
                                " runs as one process (launch runs train, and plan");
    EXPECT_EQ(output.find("mpirun"), std::string::npos) << output;
  }
}

}  // namespace
}  // namespace lt::train::testing
