// The ranks of a host sharing one copy of the weights (dist.share_weights,
// on by default with dist.zero 1; Note [Weights shared by the ranks of a
// host]), end to end on the CPU through `lazytrain launch`:
//  - the ZeRO-1 runs of streaming_ranks_test and offload_ranks_test give one
//    process's losses and weights with it; here, the private bytes per rank
//    that it removes, counted by the CPU allocator (metrics.jsonl's host
//    peak) against a run without ZeRO-1: ZeRO-1's own 2 bytes a parameter
//    (dist_runs.h), then the f32 masters (4 more) and the flat buffer the
//    all-gather needed (4 more);
//  - both ranks map the same segment while the run lasts, its name already
//    gone from /dev/shm, and nothing of it is left after a normal run or
//    after a killed rank (Note [Shared memory outlives no run]);
//  - too little room in /dev/shm is an error naming the path and the sizes;
//  - on several hosts (one machine cut into 2 hosts of 2 ranks by the
//    test's LT_TEST_RANKS_PER_HOST) each host shares its own copy, the
//    other host's shards all-gathered and copied in by one rank each: the
//    streaming and offload executors give one process's losses, norms and
//    weights.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "dist/dist_runs.h"
#include "dist/shared_memory.h"
#include "support/scoped_env.h"

namespace lt::train::testing {
namespace {

// The /dev/shm segment named after `pid` that `process` maps ("" if none).
std::string mapped_segment(pid_t process, pid_t creator) {
  std::ifstream maps("/proc/" + std::to_string(process) + "/maps");
  const std::string name = "/dev/shm/lazytrain-" + std::to_string(creator) + "-";
  for (std::string line; std::getline(maps, line);) {
    const size_t at = line.find(name);
    if (at != std::string::npos) return line.substr(at);
  }
  return "";
}

// The names in /dev/shm that a process `creator` made.
std::vector<std::string> segments_of(pid_t creator) {
  std::vector<std::string> out;
  const std::string prefix = "lazytrain-" + std::to_string(creator) + "-";
  for (const auto& e : fs::directory_iterator("/dev/shm"))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().string());
  return out;
}

TEST(SharedWeightsRanks, StreamingRanksHoldNoWeightsOfTheirOwn) {
  // 2 (ZeRO-1) + 4 (the masters) + 4 (no flat buffer) bytes a parameter.
  expect_zero_saves_per_parameter("streaming", 1, {}, 10);
}

TEST(SharedWeightsRanks, OffloadRanksHoldNoWeightsOfTheirOwn) {
  // The same: 2 (ZeRO-1) + 4 (the masters) + 4 (no flat buffer).
  expect_zero_saves_per_parameter("offload", 0, {}, 10);
}

TEST(SharedWeightsRanks, BothRanksMapOneSegmentAndAKilledRankLeavesNothing) {
  Runs runs;
  const fs::path out = runs.tmp / "shared";
  auto running = runs.start_long_run(out, {"exec.mode=streaming", "dist.zero=1"});
  ASSERT_TRUE(running);
  const pid_t rank0 = find_process(out.string(), "OMPI_COMM_WORLD_RANK=0");
  const pid_t rank1 = find_process(out.string(), "OMPI_COMM_WORLD_RANK=1");
  ASSERT_GT(rank0, 0);
  ASSERT_GT(rank1, 0);
  const std::string segment = mapped_segment(rank0, rank0);
  EXPECT_NE(segment.find("(deleted)"), std::string::npos) << "rank 0 maps '" << segment << "'";
  EXPECT_EQ(mapped_segment(rank1, rank0), segment) << "rank 1 maps another segment";
  EXPECT_TRUE(segments_of(rank0).empty()) << "the name is left in /dev/shm";
  EXPECT_NE(running->output().find("dist.share_weights: the 2 ranks of this host share"),
            std::string::npos)
      << running->output();
  ::kill(rank1, SIGKILL);
  const int status = running->wait(30);
  EXPECT_TRUE(!WIFEXITED(status) || WEXITSTATUS(status) != 0);
  EXPECT_TRUE(segments_of(rank0).empty());
  EXPECT_EQ(find_process(out.string(), "OMPI_COMM_WORLD_RANK=0"), 0) << "rank 0 still runs";
}

TEST(SharedWeightsRanks, ANormalRunLeavesNothingInDevShm) {
  Runs runs;
  const std::set<fs::path> before = [] {
    std::set<fs::path> s;
    for (const auto& e : fs::directory_iterator("/dev/shm")) s.insert(e.path());
    return s;
  }();
  std::string output;
  runs.train(2, runs.tmp / "done",
             {"exec.mode=offload", "dist.zero=1", "train.batch_size=4", "train.steps=2"}, &output);
  EXPECT_NE(output.find("share one copy of the weights"), std::string::npos) << output;
  for (const auto& e : fs::directory_iterator("/dev/shm")) {
    if (before.count(e.path())) continue;
    EXPECT_NE(e.path().filename().string().rfind("lazytrain-", 0), 0u) << e.path() << " is left";
  }
}

TEST(SharedWeightsRanks, TwoHostsOfTwoRanksGiveOneProcess) {
  const lt::testing::ScopedEnv hosts("LT_TEST_RANKS_PER_HOST", "2");
  for (const char* mode : {"streaming", "offload"}) {
    SCOPED_TRACE(mode);
    Runs runs;
    const std::vector<std::string> sets = {std::string("exec.mode=") + mode, "dist.zero=1",
                                           "train.batch_size=8", "train.steps=4"};
    runs.train(0, runs.tmp / "one", sets);
    std::string output;
    runs.train(4, runs.tmp / "hosts", sets, &output);
    EXPECT_NE(output.find("the 2 ranks of this host share one copy of the weights"),
              std::string::npos)
        << output;
    EXPECT_NE(output.find("on each of 2 hosts, all-gathered between them"), std::string::npos);
    expect_same_steps(runs.tmp / "one", runs.tmp / "hosts");
    expect_same_weights(runs.tmp / "one" / "step-4", runs.tmp / "hosts" / "step-4");
  }
}

TEST(SharedMemory, TooLittleRoomNamesThePathAndTheSizes) {
  const size_t room = dist::free_bytes_at("/dev/shm");
  const size_t asked = room + (size_t{1} << 40);
  const std::string name = "/lazytrain-test-" + std::to_string(::getpid());
  try {
    dist::SharedMemory::create(name, asked);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/dev/shm"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(asked) + " bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("GB free"), std::string::npos) << what;
    EXPECT_NE(what.find("dist.share_weights false"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists("/dev/shm" + name));
}

TEST(SharedMemory, TwoMappingsSeeOneMemoryAndTheNameGoesWithTheCreator) {
  const std::string name = "/lazytrain-test-" + std::to_string(::getpid()) + "-b";
  {
    dist::SharedMemory made = dist::SharedMemory::create(name, 8192);
    dist::SharedMemory seen = dist::SharedMemory::attach(name, 8192);
    static_cast<char*>(made.data())[4000] = 42;
    EXPECT_EQ(static_cast<char*>(seen.data())[4000], 42);
    EXPECT_EQ(static_cast<char*>(seen.data())[0], 0);             // made zeroed
    EXPECT_THROW(dist::SharedMemory::attach(name, 4096), Error);  // another size
    EXPECT_TRUE(fs::exists("/dev/shm" + name));
    made.unlink();
    EXPECT_FALSE(fs::exists("/dev/shm" + name));
    static_cast<char*>(made.data())[1] = 7;  // still mapped after the unlink
    EXPECT_EQ(static_cast<char*>(seen.data())[1], 7);
  }
  { dist::SharedMemory made = dist::SharedMemory::create(name, 4096); }
  EXPECT_FALSE(fs::exists("/dev/shm" + name)) << "the creator's destructor unlinks";
}

}  // namespace
}  // namespace lt::train::testing
