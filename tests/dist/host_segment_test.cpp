// The shared weights' segment of a torchrun-style launch, which has no MPI
// to find the ranks of a host (dist/host_segment.h): the hosts are blocks
// of LOCAL_WORLD_SIZE consecutive ranks (counted by hand below), and a
// rank other than local rank 0 maps the segment once local rank 0 has made
// it, or gives up within the timeout naming the segment and local rank 0.
// (The whole launch needs NCCL, so two GPUs: not run here.)
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "dist/host_segment.h"

namespace lt::dist {
namespace {

using Clock = std::chrono::steady_clock;

World torchrun(int rank, int size, int local_rank, int local_size) {
  World w;
  w.launcher = Launcher::Torchrun;
  w.rank = rank;
  w.size = size;
  w.local_rank = local_rank;
  w.local_size = local_size;
  return w;
}

std::string error_of(const World& w) {
  try {
    torchrun_host_layout(w);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TorchrunHostLayout, HostsAreBlocksOfLocalWorldSize) {
  const HostSegment s = torchrun_host_layout(torchrun(5, 8, 1, 4));
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_EQ(s.local_size, 4);
  EXPECT_EQ(s.hosts, 2);
  EXPECT_EQ(s.members, (std::vector<int>{4, 5, 6, 7}));
  const HostSegment one = torchrun_host_layout(torchrun(0, 3, 0, 3));
  EXPECT_EQ(one.hosts, 1);
  EXPECT_EQ(one.members, (std::vector<int>{0, 1, 2}));
  EXPECT_NE(error_of(torchrun(1, 2, 1, 0)).find("must set LOCAL_WORLD_SIZE"), std::string::npos);
  const std::string e = error_of(torchrun(5, 8, 0, 4));  // rank 5 cannot be local rank 0
  EXPECT_NE(e.find("RANK=5, LOCAL_RANK=0, LOCAL_WORLD_SIZE=4 and WORLD_SIZE=8"), std::string::npos)
      << e;
  EXPECT_NE(e.find("dist.share_weights false"), std::string::npos) << e;
}

// Another process (local rank 1) starts first and maps the segment once
// this one (local rank 0) has made it; each sees what the other wrote.
TEST(NamedHostSegment, TheOtherRankMapsItOnceLocalRankZeroHasMadeIt) {
  const std::string name = "/lazytrain-test-" + std::to_string(::getpid()) + "-named";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 1;
    try {
      auto seg = open_named_host_segment(name, 8192, false, 10);
      volatile char* bytes = static_cast<char*>(seg->data());
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while (bytes[100] != 42 && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      bytes[200] = 43;
      code = bytes[100] == 42 ? 0 : 2;
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto made = open_named_host_segment(name, 8192, true, 10);
  static_cast<volatile char*>(made->data())[100] = 42;
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(static_cast<volatile char*>(made->data())[200], 43);
  made->unlink();
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + name));
}

TEST(NamedHostSegment, NoLocalRankZeroIsAnErrorWithinTheTimeout) {
  const std::string name = "/lazytrain-test-" + std::to_string(::getpid()) + "-none";
  const auto start = Clock::now();
  std::string error;
  try {
    open_named_host_segment(name, 4096, false, 0.5);
  } catch (const Error& e) {
    error = e.what();
  }
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(waited, 0.5);
  EXPECT_LT(waited, 5);
  EXPECT_NE(error.find("for local rank 0 of this host to make the shared weights' segment "
                       "/dev/shm" +
                       name + " of 4096 bytes"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace lt::dist
