// The launcher's environment read into a World: each launcher's variables,
// and the errors a bad launch gets (naming the variable or key).
#include "dist/world.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"

namespace lt::dist {
namespace {

EnvironmentLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(World, NoLauncherIsOneProcess) {
  const World w = world_from_environment(env_of({{"PATH", "/bin"}}));
  EXPECT_EQ(w.launcher, Launcher::None);
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 1);
  EXPECT_FALSE(w.distributed());
}

TEST(World, OpenMpiVariables) {
  const World w = world_from_environment(env_of({{"OMPI_COMM_WORLD_RANK", "3"},
                                                 {"OMPI_COMM_WORLD_SIZE", "4"},
                                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  EXPECT_EQ(w.launcher, Launcher::Mpi);
  EXPECT_EQ(w.rank, 3);
  EXPECT_EQ(w.size, 4);
  EXPECT_EQ(w.local_rank, 1);
}

// An MPI job's own variables win over torchrun-style ones left in the
// environment (half set, which alone would be an error).
TEST(World, MpiWinsOverStrayTorchrunVariables) {
  const World w = world_from_environment(
      env_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"RANK", "5"}}));
  EXPECT_EQ(w.launcher, Launcher::Mpi);
  EXPECT_EQ(w.size, 2);
}

TEST(World, SrunWithPmix) {
  const World w = world_from_environment(
      env_of({{"PMIX_RANK", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(w.launcher, Launcher::Mpi);
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.size, 2);
  EXPECT_EQ(w.local_rank, 1);
}

TEST(World, TorchrunVariables) {
  const World w = world_from_environment(env_of({{"RANK", "1"},
                                                 {"WORLD_SIZE", "2"},
                                                 {"LOCAL_RANK", "1"},
                                                 {"MASTER_ADDR", "127.0.0.1"},
                                                 {"MASTER_PORT", "29500"}}));
  EXPECT_EQ(w.launcher, Launcher::Torchrun);
  EXPECT_EQ(w.rank, 1);
  EXPECT_EQ(w.size, 2);
  EXPECT_EQ(w.local_rank, 1);
  EXPECT_EQ(w.master_addr, "127.0.0.1");
  EXPECT_EQ(w.master_port, 29500);
  EXPECT_EQ(w.local_size, 0);  // LOCAL_WORLD_SIZE unset
  const World four = world_from_environment(env_of({{"RANK", "5"},
                                                    {"WORLD_SIZE", "8"},
                                                    {"LOCAL_RANK", "1"},
                                                    {"LOCAL_WORLD_SIZE", "4"},
                                                    {"MASTER_ADDR", "127.0.0.1"},
                                                    {"MASTER_PORT", "29500"}}));
  EXPECT_EQ(four.local_size, 4);
}

TEST(World, HalfSetTorchrunVariablesNameTheMissingOnes) {
  const std::string e = error_of([] {
    world_from_environment(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}));
  });
  EXPECT_NE(e.find("sets RANK, WORLD_SIZE, LOCAL_RANK but not MASTER_ADDR, MASTER_PORT"),
            std::string::npos)
      << e;
}

TEST(World, MalformedVariablesAreNamed) {
  auto torchrun = [](std::string rank, std::string size, std::string port) {
    return env_of({{"RANK", rank},
                   {"WORLD_SIZE", size},
                   {"LOCAL_RANK", "0"},
                   {"MASTER_ADDR", "localhost"},
                   {"MASTER_PORT", port}});
  };
  EXPECT_NE(
      error_of([&] { world_from_environment(torchrun("0", "two", "1")); }).find("WORLD_SIZE='two'"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              world_from_environment(torchrun("0", "2", "70000"));
            }).find("MASTER_PORT=70000"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              world_from_environment(torchrun("2", "2", "29500"));
            }).find("RANK=2 is not below WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              world_from_environment(
                  env_of({{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
            }).find("OMPI_COMM_WORLD_RANK='-1'"),
            std::string::npos);
}

TEST(World, BatchMustDivideByTheWorldSize) {
  World two;
  two.size = 2;
  EXPECT_NO_THROW(check_batch_divides(4, 2, two));
  EXPECT_NO_THROW(check_batch_divides(3, 1, World{}));  // one process: anything
  EXPECT_NE(error_of([&] {
              check_batch_divides(3, 1, two);
            }).find("train.batch_size 3 is the global batch and must divide by the world size 2"),
            std::string::npos);
  // 6 over 2 ranks divides, but not its micro-batches of 3.
  EXPECT_NE(error_of([&] { check_batch_divides(6, 2, two); }).find("train.grad_accum 2"),
            std::string::npos);
}

// What rank 0 says of the split, by hand: 8 sequences over 2 ranks are 4
// each; with train.grad_accum 2 each micro-batch of 4 gives each rank 2; 48
// over 8 GPUs in 3 micro-batches of 16 gives each rank 6, 2 of each.
TEST(World, DataParallelLineSaysHowTheBatchIsSplit) {
  World two;
  two.size = 2;
  EXPECT_EQ(describe_data_parallel(8, 1, two, false),
            "dist: 2 ranks, data parallel: each rank runs 4 of train.batch_size 8 sequences a "
            "step, and the ranks sum their gradients over MPI before each update");
  EXPECT_EQ(describe_data_parallel(8, 2, two, false),
            "dist: 2 ranks, data parallel: each rank runs 4 of train.batch_size 8 sequences a "
            "step (2 of each micro-batch of 4, train.grad_accum 2), and the ranks sum their "
            "gradients over MPI before each update");
  World eight;
  eight.size = 8;
  EXPECT_EQ(describe_data_parallel(48, 3, eight, true),
            "dist: 8 ranks, data parallel: each rank runs 6 of train.batch_size 48 sequences a "
            "step (2 of each micro-batch of 16, train.grad_accum 3), and the ranks sum their "
            "gradients over NCCL before each update");
}

}  // namespace
}  // namespace lt::dist
