// Bad launches of `lazytrain train`, as a user makes them: the error names
// the variable (or the launcher to use) and the rank, once, and the exit
// status is 1.
#include <gtest/gtest.h>

#include "support/scoped_env.h"
#include "train/train_helpers.h"

namespace lt::train::testing {
namespace {

using lt::testing::ScopedEnv;

// `prefix` train ... on the CPU, expected to fail with status 1.
std::string train_fails(const TempDir& tmp, std::vector<std::string> prefix = {}) {
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  std::string output;
  std::vector<std::string> args = {"train", "--no-sample",
                                   "--set", "model.path=" + fixture("qwen3").string(),
                                   "--set", "data.path=" + (tmp / "data.jsonl").string(),
                                   "--set", "data.format=tokens",
                                   "--set", "train.device=cpu",
                                   "--set", "train.steps=1",
                                   "--set", "train.seq_len=16",
                                   "--set", "out.dir=" + (tmp / "out").string()};
  args.insert(args.begin(), prefix.begin(), prefix.end());
  const int code = run_program(args, tmp / "run.log", &output, 60);
  EXPECT_EQ(code, 1) << output;
  return output;
}

TEST(BootstrapCli, HalfSetTorchrunVariablesAreNamed) {
  TempDir tmp("bootstrap_half");
  ScopedEnv rank("RANK", "0"), size("WORLD_SIZE", "2"), local("LOCAL_RANK", nullptr),
      addr("MASTER_ADDR", nullptr), port("MASTER_PORT", nullptr);
  const std::string output = train_fails(tmp);
  EXPECT_NE(output.find("error: a torchrun-style launch sets RANK, WORLD_SIZE but not LOCAL_RANK, "
                        "MASTER_ADDR, MASTER_PORT"),
            std::string::npos)
      << output;
}

// torchrun's ranks meet over NCCL; on the CPU they need mpirun.
TEST(BootstrapCli, TorchrunOnTheCpuSaysToUseMpirun) {
  TempDir tmp("bootstrap_cpu");
  ScopedEnv rank("RANK", "0"), size("WORLD_SIZE", "2"), local("LOCAL_RANK", "0"),
      addr("MASTER_ADDR", "127.0.0.1"), port("MASTER_PORT", "29999");
  const std::string output = train_fails(tmp);
  const std::string expected = "rank 0 of 2: error: a torchrun-style launch";
  EXPECT_NE(output.find(expected), std::string::npos) << output;
  EXPECT_NE(output.find("on the CPU start the ranks with mpirun"), std::string::npos) << output;
  EXPECT_EQ(output.find(expected), output.rfind(expected)) << "printed twice:\n" << output;
}

// launch --via fork starts the ranks itself with torchrun's variables (the
// GPU way, without mpirun): on the CPU each rank that gets that far says
// which rank of how many it is and that the CPU needs mpirun, and the
// launcher names the first rank that failed and stops the other.
TEST(BootstrapCli, ForkedRanksGetTheirVariablesAndAFailureStopsTheOthers) {
  TempDir tmp("bootstrap_fork");
  const std::string output = train_fails(tmp, {"launch", "--via", "fork", "--nproc", "2"});
  EXPECT_TRUE(output.find("rank 0 of 2: error: a torchrun-style launch") != std::string::npos ||
              output.find("rank 1 of 2: error: a torchrun-style launch") != std::string::npos)
      << output;
  EXPECT_NE(output.find("exited with status 1; stopping the other process"), std::string::npos)
      << output;
}

}  // namespace
}  // namespace lt::train::testing
