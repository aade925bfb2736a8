// The MPI calls of a run's set-up wait on the other ranks at most
// dist.timeout_s, as the step's collectives do (dist/mpi_waits.h, Note
// [Naming the rank that does not come]): finding the ranks of each host
// (a barrier of every rank before MPI_Comm_split_type, then the count of
// hosts), local rank 0's broadcast of the shared weights' segment name,
// the barrier once every rank of the host has mapped it, and the NCCL id's
// broadcast. Each case runs this test binary as 2 ranks under mpirun
// (MpiSetUpRank.Run below, skipped when not under mpirun). One rank stops
// itself (SIGSTOP: alive and silent, which mpirun does not notice) just
// before one of the calls; the other must give up no sooner than the
// timeout and soon after it, naming the stopped rank and the call. (A
// broadcast's root need not wait for the others: the root is the rank
// that stops before a broadcast.) With nobody stopped, both
// ranks get what a brute-force count of the layout says: one host, local
// ranks 0 and 1 of 2, rank 0's bytes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "dist/dist_runs.h"
#include "dist/host_segment.h"
#include "dist/mpi.h"
#include "dist/process.h"

extern char** environ;

namespace lt::train::testing {
namespace {

constexpr const char* kStopBefore = "LT_TEST_MPI_STOP_BEFORE";  // a call below, or "nothing"
constexpr const char* kStopRank = "LT_TEST_MPI_STOP_RANK";      // who stops before it
constexpr const char* kPidFile = "LT_TEST_MPI_PID_FILE";        // where that rank writes its pid
constexpr double kTimeoutS = 1.5;  // with a rank stopped; 60 s with none (a loaded machine)

// The set-up's calls in the order a run makes them; one rank stops before
// one of them, and each prints what it got or what it threw.
TEST(MpiSetUpRank, Run) {
  const char* stop_before = std::getenv(kStopBefore);
  if (stop_before == nullptr) GTEST_SKIP() << "one rank of MpiSetUpTimeouts, under mpirun";
  const dist::World& world = dist::this_world();  // MPI_Init
  ASSERT_EQ(world.size, 2);
  const bool stops = std::atoi(std::getenv(kStopRank)) == world.rank;
  if (stops) std::ofstream(std::getenv(kPidFile)) << ::getpid() << "\n";
  auto reach = [&](const char* call) {
    if (stops && std::strcmp(call, stop_before) == 0) ::raise(SIGSTOP);
  };
  const double timeout_s = std::strcmp(stop_before, "nothing") == 0 ? 60 : kTimeoutS;
  std::string got;
  try {
    reach("host ranks");
    const dist::HostRanks host = dist::mpi_host_ranks(timeout_s);
    got += "local rank " + std::to_string(host.local_rank) + " of " +
           std::to_string(host.local_size) + ", hosts " + std::to_string(host.hosts);
    std::array<char, 8> bytes{};
    if (world.rank == 0) std::memcpy(bytes.data(), "rank0's", 8);
    reach("host broadcast");
    dist::mpi_host_broadcast(bytes, "the test's host broadcast", timeout_s);
    got += std::string(", host broadcast ") + bytes.data();
    reach("host barrier");
    dist::mpi_host_barrier("the test's host barrier", timeout_s);
    bytes.fill(0);
    if (world.rank == 0) std::memcpy(bytes.data(), "NCCL id", 8);
    reach("NCCL id broadcast");
    dist::mpi_broadcast(bytes, timeout_s);
    got += std::string(", broadcast ") + bytes.data();
    const dist::HostSegment segment = dist::open_host_segment(4096, timeout_s);
    got += ", segment of " + std::to_string(segment.memory->bytes()) + " bytes";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d threw: %s\n", world.rank, e.what());
    dist::abort_other_ranks();
  }
  std::fprintf(stderr, "rank %d got: %s\n", world.rank, got.c_str());
}

// `mpirun -np 2` of this binary's MpiSetUpRank.Run, rank `stop_rank`
// stopping before `stop_before`; the output into a log in `dir`.
class TwoRanks {
 public:
  static std::string file_name(std::string call) {
    std::replace(call.begin(), call.end(), ' ', '_');
    return call;
  }
  TwoRanks(const std::string& stop_before, int stop_rank, const fs::path& dir)
      : log_(dir / (file_name(stop_before) + ".log")),
        pid_file_(dir / (file_name(stop_before) + ".pid")) {
    prepare_mpirun_environment();
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    std::vector<std::string> args = {"mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none"};
    for (const std::string& variable : {std::string(kStopBefore) + "=" + stop_before,
                                        std::string(kStopRank) + "=" + std::to_string(stop_rank),
                                        std::string(kPidFile) + "=" + pid_file_.string()})
      args.insert(args.end(), {"-x", variable});
    args.insert(args.end(), {self, "--gtest_filter=MpiSetUpRank.Run"});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, log_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
    EXPECT_EQ(posix_spawnp(&pid_, "mpirun", &files, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&files);
    start_ = std::chrono::steady_clock::now();
  }
  ~TwoRanks() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    kill_stopped();
  }
  TwoRanks(const TwoRanks&) = delete;
  TwoRanks& operator=(const TwoRanks&) = delete;

  // Waits for mpirun (at most `limit_s`); the seconds from the start.
  double wait(double limit_s) {
    const auto deadline = start_ + std::chrono::duration<double>(limit_s);
    while (::waitpid(pid_, &status_, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "mpirun still runs after " << limit_s << " s:\n" << output();
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status_, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    reaped_ = true;
    kill_stopped();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  bool succeeded() const { return WIFEXITED(status_) && WEXITSTATUS(status_) == 0; }
  std::string output() const { return read_text(log_); }

 private:
  // mpirun wakes a stopped rank to end it; should it not, this does.
  void kill_stopped() {
    std::ifstream in(pid_file_);
    pid_t stopped = 0;
    if (in >> stopped && stopped > 0) ::kill(stopped, SIGKILL);
  }
  fs::path log_, pid_file_;
  pid_t pid_ = 0;
  int status_ = 0;
  bool reaped_ = false;
  std::chrono::steady_clock::time_point start_;
};

TEST(MpiSetUpTimeouts, WithEveryRankThereTheCallsGiveTheLayout) {
  TempDir tmp("mpi_setup");
  TwoRanks ranks("nothing", -1, tmp.path());
  ranks.wait(60);
  const std::string out = ranks.output();
  EXPECT_TRUE(ranks.succeeded()) << out;
  for (int r = 0; r < 2; ++r) {
    const std::string line = "rank " + std::to_string(r) + " got: local rank " + std::to_string(r) +
                             " of 2, hosts 1, host broadcast rank0's, broadcast NCCL id, "
                             "segment of 4096 bytes\n";
    EXPECT_NE(out.find(line), std::string::npos) << line << "\nnot in:\n" << out;
  }
}

// Each call, a rank stopped before it: the other's error names the call
// and the stopped rank, after the timeout and within seconds of it. The
// cases run at once (each mostly waits).
TEST(MpiSetUpTimeouts, AStoppedRankIsNamedWithinTheTimeout) {
  TempDir tmp("mpi_setup");
  struct Case {
    std::string call;
    int stopped;  // the rank that stops before it
    std::string what;
  };
  const std::vector<Case> cases = {
      {"host ranks", 1, "the meeting of the ranks before they find which share a host"},
      {"host broadcast", 0, "the test's host broadcast"},
      {"host barrier", 1, "the test's host barrier"},
      {"NCCL id broadcast", 0, "the broadcast of rank 0's NCCL id"},
  };
  std::vector<std::unique_ptr<TwoRanks>> runs;
  for (const Case& c : cases)
    runs.push_back(std::make_unique<TwoRanks>(c.call, c.stopped, tmp.path()));
  for (size_t i = 0; i < cases.size(); ++i) {
    const double took = runs[i]->wait(30);
    const std::string out = runs[i]->output();
    const Case& c = cases[i];
    SCOPED_TRACE(c.call + ":\n" + out);
    EXPECT_FALSE(runs[i]->succeeded());
    const std::string error = "rank " + std::to_string(1 - c.stopped) +
                              " threw: waited dist.timeout_s = 1.5 s for " + c.what +
                              " (collective ";
    const size_t at = out.find(error);
    ASSERT_NE(at, std::string::npos) << error;
    const std::string line = out.substr(at, out.find('\n', at) - at);
    EXPECT_NE(line.find("): rank " + std::to_string(c.stopped) + " has not reached it"),
              std::string::npos)
        << line;
    EXPECT_GT(took, kTimeoutS);
    EXPECT_LT(took, kTimeoutS + 20);  // mpirun's start and end, on a loaded 2-core machine
  }
}

}  // namespace
}  // namespace lt::train::testing
