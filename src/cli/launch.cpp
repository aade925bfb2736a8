// `lazytrain launch --nproc N train ...`: N local ranks of one run, started
// by mpirun (which gives each its rank and, on the CPU, MPI's collectives:
// docs/distributed.md). The launcher forwards SIGINT and SIGTERM to
// mpirun, which hands them to every rank; the ranks agree to stop after
// the same step, rank 0 saves, and all exit.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"

namespace lt::cli {

namespace {

namespace fs = std::filesystem;

std::atomic<pid_t> launched_pid{0};
extern "C" void forward_stop_signal(int sig) {
  const pid_t pid = launched_pid.load();
  if (pid > 0) ::kill(pid, sig);
}

// `name` in PATH, or empty.
fs::path find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / name;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

// Runs `argv` as a child with SIGINT and SIGTERM forwarded to it; its exit
// status (128 + the signal when a signal ended it).
int run_forwarding_signals(std::vector<std::string> argv) {
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  const pid_t pid = ::fork();
  LT_CHECK(pid >= 0, "lazytrain launch: fork failed: ", std::strerror(errno));
  if (pid == 0) {
    // Its own process group: Ctrl-C at a terminal signals the launcher's
    // group, so the child gets the one forwarded copy only (mpirun takes a
    // second SIGINT within seconds as "abort now", which would cut a save).
    ::setpgid(0, 0);
    ::execv(raw[0], raw.data());
    _exit(127);
  }
  launched_pid.store(pid);
  auto old_int = std::signal(SIGINT, forward_stop_signal);
  auto old_term = std::signal(SIGTERM, forward_stop_signal);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  launched_pid.store(0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto nproc = std::make_shared<int>(0);
  auto* cmd = app.add_subcommand(
      "launch",
      "Run a command (train ...) as N local processes of one data-parallel run, through mpirun");
  cmd->add_option("--nproc", *nproc, "Processes (ranks) on this machine")
      ->required()
      ->check(CLI::PositiveNumber);
  // Everything from the first argument launch does not know is the command.
  cmd->prefix_command();
  cmd->callback([cmd, nproc] {
    const std::vector<std::string> command = cmd->remaining();
    LT_CHECK(!command.empty(),
             "lazytrain launch: no command; e.g. lazytrain launch --nproc 2 "
             "train run.yaml");
    const fs::path self = fs::read_symlink("/proc/self/exe");
    // Every rank inherits this; NVLink multicast is never used.
    ::setenv("NCCL_NVLS_ENABLE", "0", 1);
    // The ranks share this machine's cores: each rank's thread pool gets
    // its share (core/thread_pool.cpp reads LT_NUM_THREADS), unless the
    // user chose.
    if (*nproc > 1 && !std::getenv("LT_NUM_THREADS")) {
      const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      ::setenv("LT_NUM_THREADS", std::to_string(std::max(1u, cores / *nproc)).c_str(), 1);
    }
    std::vector<std::string> argv;
    if (*nproc > 1) {
      const fs::path mpirun = find_in_path("mpirun");
      LT_CHECK(!mpirun.empty(),
               "lazytrain launch: mpirun is not in PATH; install openmpi-bin "
               "(scripts/install-deps.sh), or start the ranks with mpirun, srun "
               "--mpi=pmix or torchrun --no-python yourself");
      // --oversubscribe: N may exceed the cores MPI counts; --bind-to none:
      // each rank's thread pool may use every core (MPI would pin a rank to
      // one core).
      argv = {mpirun.string(),
              "-np",
              std::to_string(*nproc),
              "--oversubscribe",
              "--bind-to",
              "none",
              "-x",
              "NCCL_NVLS_ENABLE",
              "-x",
              "LT_NUM_THREADS"};
    }
    argv.push_back(self.string());
    argv.insert(argv.end(), command.begin(), command.end());
    const int code = run_forwarding_signals(argv);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace lt::cli
