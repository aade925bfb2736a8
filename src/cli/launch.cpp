// `lazytrain launch --nproc N [--via auto|mpirun|fork] CMD ...`: N local
// ranks of one run (docs/distributed.md).
//  - mpirun (auto, when it is in PATH): gives each rank its rank and, on
//    the CPU, MPI's collectives.
//  - fork (auto without mpirun; GPUs only): the launcher starts the N ranks
//    itself with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
//    MASTER_ADDR=127.0.0.1, MASTER_PORT a free port), and they meet over
//    NCCL, rank 0 handing out the NCCL id over TCP.
// The launcher forwards SIGINT and SIGTERM to the ranks (the ranks agree to
// stop after the same step; rank 0 saves; Note [Stopping ranks under
// mpirun]). When a rank (or mpirun) fails, the launcher names it, stops the
// others (SIGTERM, then SIGKILL after kStopGraceS) and exits with its
// status. When the launcher itself dies (SIGKILL), the kernel sends its
// children SIGTERM (Note [Children die with the launcher]).
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "core/program_path.h"

extern char** environ;

namespace lt::cli {

namespace {

namespace fs = std::filesystem;

// Local processes at most, as --nproc's range.
constexpr int kMaxChildren = 4096;

// Stop signals received and not forwarded yet. The handler only counts
// them (async-signal-safe); run_all's loop forwards them within one poll.
// SIGHUP (the terminal closed: it comes twice, from the shell and the
// kernel) goes to the ranks once, as SIGTERM: a rank takes a second
// SIGTERM as "exit now, unsaved".
std::atomic<int> pending_sigint{0}, pending_sigterm{0}, pending_sighup{0};
extern "C" void count_stop_signal(int sig) {
  if (sig == SIGHUP) {
    pending_sighup.store(1);
    return;
  }
  (sig == SIGINT ? pending_sigint : pending_sigterm).fetch_add(1);
}

// After one rank fails, the others get SIGTERM (a save if they can), then
// SIGKILL this many seconds later: a rank whose peer died may be waiting
// in a collective.
constexpr double kStopGraceS = 30;

// One process to start: its command line, and variables set on top of the
// launcher's environment; `name` for messages ("rank 1", "mpirun").
// `stop_its_children`: a stop signal goes to the processes it started (the
// ranks), not to it (Note [Stopping ranks under mpirun]).
struct Process {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  std::string name;
  bool stop_its_children = false;
  int children_expected = 0;  // with stop_its_children: the ranks it starts
};

// Note [Stopping ranks under mpirun]: mpirun (OpenMPI 4.1) takes SIGINT or
// SIGTERM as an abort of the job: it sends each rank SIGTERM, SIGKILLs it
// a second later (odls_base_sigkill_timeout), which cuts a save longer than
// that, and exits 1 even when every rank stopped cleanly; it cannot be told
// to forward either signal (ess_base_forward_signals refuses them). So the
// launcher signals mpirun's children, the ranks, itself: they stop after
// the same step, rank 0 saves, each exits 0, and mpirun exits with their
// status, as `lazytrain train` alone does.
// A stop before mpirun has started every rank is held until it has (Note
// [A stop before the ranks start]).

// Note [A stop before the ranks start]: a stop in a launch's first tenth of
// a second was lost: sent to mpirun before it had started its ranks, it
// was dropped (mpirun trained to the end and exited 0) or ended mpirun
// alone, by a timing no script can tell. It is held until mpirun's ranks
// run this program (a rank forked but not yet exec'd still has mpirun's
// handlers), then forwarded to them as any later stop: a rank still
// setting up ends by the signal, one past its setup stops before its
// first step, as `lazytrain train` alone does. A stop held kHoldStopS
// seconds (mpirun starting no rank) goes to mpirun itself. Ranks the
// launcher forks itself take their stops at once: until exec they have
// the default actions (start()).
constexpr double kHoldStopS = 10;

// The processes `parent` started that still run, from Linux's
// /proc/PID/task/TID/children (one list per thread); empty when /proc does
// not say.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  std::error_code error;
  fs::directory_iterator task(fmt::format("/proc/{}/task", parent), error);
  for (; !error && task != fs::directory_iterator(); task.increment(error)) {
    std::ifstream list(task->path() / "children");
    for (pid_t pid = 0; list >> pid;) children.push_back(pid);
  }
  return children;
}

// Sends `sig` to each running process, or to its children when it is to
// stop them.
void forward_stop_signal(int sig, const std::vector<Process>& processes,
                         const std::vector<pid_t>& pids, const std::vector<bool>& running) {
  for (size_t i = 0; i < pids.size(); ++i) {
    if (!running[i]) continue;
    const std::vector<pid_t> children =
        processes[i].stop_its_children ? children_of(pids[i]) : std::vector<pid_t>{};
    if (children.empty()) ::kill(pids[i], sig);
    for (const pid_t child : children) ::kill(child, sig);
  }
}

// Whether every process that stops its children has started all of them
// running `self` (Note [A stop before the ranks start]).
bool ranks_started(const std::vector<Process>& processes, const std::vector<pid_t>& pids,
                   const std::vector<bool>& running, const fs::path& self) {
  for (size_t i = 0; i < pids.size(); ++i) {
    if (!running[i] || !processes[i].stop_its_children) continue;
    int started = 0;
    for (const pid_t child : children_of(pids[i])) {
      std::error_code error;
      if (fs::read_symlink(fmt::format("/proc/{}/exe", child), error) == self) ++started;
    }
    if (started < processes[i].children_expected) return false;
  }
  return true;
}

// Note [Children die with the launcher]: a launcher killed outright
// (SIGKILL, the OOM killer) forwards nothing, and its children (mpirun and
// its ranks, or the forked ranks) trained on as orphans holding out.dir's
// lock. Each child asks the kernel for SIGTERM when the launcher dies
// (PR_SET_PDEATHSIG, kept across exec): mpirun takes it as an abort and
// ends its ranks, a forked rank as a stop (it saves after the step in
// flight). The signal is tied to the thread that forked, which is the
// one in run_all, waiting for the children until they end. A launcher
// that died before the request was made is seen by getppid() no longer
// being it, and the child exits there. SIGTERM is set back to its default
// first, as exec would: the launcher's counting handler, inherited until
// exec, would swallow a SIGTERM that came in between.

// Forks and execs `p` into process group `group` (0: a new group of its
// own), so that a terminal's Ctrl-C reaches the launcher only and each
// rank gets the one forwarded copy (a rank takes a second SIGINT as "exit
// now", unsaved). Everything exec needs is built before the fork.
pid_t start(const Process& p, pid_t group) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    const bool replaced =
        std::any_of(p.env.begin(), p.env.end(), [&](const auto& kv) { return kv.first == key; });
    if (!replaced) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : p.env) env_strings.push_back(key + "=" + value);
  std::vector<std::string> argv_strings = p.argv;
  std::vector<char*> argv, envp;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  for (std::string& e : env_strings) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  LT_CHECK(pid >= 0, "lazytrain launch: fork failed: ", std::strerror(errno));
  if (pid == 0) {  // only async-signal-safe calls until exec
    ::setpgid(0, group);
    struct sigaction default_action = {};
    default_action.sa_handler = SIG_DFL;
    ::sigaction(SIGTERM, &default_action, nullptr);
    // A stop forwarded before exec would be counted by the launcher's
    // handler in this copy, and lost; one that is ignored stays so.
    for (const int sig : {SIGINT, SIGHUP}) {
      struct sigaction current = {};
      ::sigaction(sig, nullptr, &current);
      if (current.sa_handler == count_stop_signal) ::sigaction(sig, &default_action, nullptr);
    }
    // Note [Children die with the launcher].
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != launcher) _exit(128 + SIGTERM);
    ::execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  ::setpgid(pid, group == 0 ? pid : group);  // also here: whichever runs first
  return pid;
}

std::string describe(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return "stopped";
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

// Starts every process with SIGINT and SIGTERM (and SIGHUP, once, as
// SIGTERM) forwarded to them and waits for all; the first failure's exit
// code (128 + signal), else 0. `self`: this program, which the ranks run.
int run_all(const std::vector<Process>& processes, const fs::path& self) {
  LT_CHECK(processes.size() <= kMaxChildren, "lazytrain launch: at most ", kMaxChildren,
           " local processes");
  std::vector<pid_t> pids;
  std::vector<bool> running;
  pending_sigint.store(0);
  pending_sigterm.store(0);
  pending_sighup.store(0);
  bool hup_forwarded = false;
  auto old_int = std::signal(SIGINT, count_stop_signal);
  auto old_term = std::signal(SIGTERM, count_stop_signal);
  // nohup's ignored SIGHUP stays ignored, and a script's background job's
  // SIGINT, as `lazytrain train` keeps them (its note too: a `kill -INT`
  // that does nothing looks like a hung run).
  auto old_hup = std::signal(SIGHUP, count_stop_signal);
  if (old_hup == SIG_IGN) std::signal(SIGHUP, SIG_IGN);
  if (old_int == SIG_IGN) {
    std::signal(SIGINT, SIG_IGN);
    std::fputs(fmt::format("launch: note: this process was started with SIGINT ignored (a shell's "
                           "background job), so Ctrl-C does not reach it; `kill {}` (SIGTERM) "
                           "stops the run after a save\n",
                           ::getpid())
                   .c_str(),
               stderr);
  }
  for (const Process& p : processes) {
    pids.push_back(start(p, pids.empty() ? 0 : pids.front()));
    running.push_back(true);
  }
  // The launcher outlives its output, as a run does (`| tee` stopped by the
  // same Ctrl-C): it must stay to wait for the ranks' saves. (After the
  // starts: an ignored signal would stay ignored in what they exec.)
  auto old_pipe = std::signal(SIGPIPE, SIG_IGN);
  int first_failure = 0;
  // When the processes left get SIGKILL; time_point::max() while no rank failed.
  auto kill_at = std::chrono::steady_clock::time_point::max();
  // When a stop began to be held; time_point::max() while none is.
  auto stop_held_since = std::chrono::steady_clock::time_point::max();
  bool started = false;  // Note [A stop before the ranks start]
  size_t left = pids.size();
  while (left > 0) {
    const bool stop_waiting =
        pending_sigint.load() + pending_sigterm.load() + pending_sighup.load() > 0;
    if (stop_waiting && !started) started = ranks_started(processes, pids, running, self);
    const auto now = std::chrono::steady_clock::now();
    if (stop_waiting && !started) stop_held_since = std::min(stop_held_since, now);
    const bool hold = stop_waiting && !started &&
                      now - stop_held_since < std::chrono::duration<double>(kHoldStopS);
    // Each signal once, in turn: a second Ctrl-C is the ranks' "exit now".
    for (int n = hold ? 0 : pending_sigint.exchange(0); n > 0; --n)
      forward_stop_signal(SIGINT, processes, pids, running);
    for (int n = hold ? 0 : pending_sigterm.exchange(0); n > 0; --n)
      forward_stop_signal(SIGTERM, processes, pids, running);
    if (!hold && pending_sighup.exchange(0) != 0 && !hup_forwarded) {
      hup_forwarded = true;
      forward_stop_signal(SIGTERM, processes, pids, running);
    }
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done <= 0) {
      if (std::chrono::steady_clock::now() > kill_at) {
        for (size_t i = 0; i < pids.size(); ++i)
          if (running[i]) ::kill(pids[i], SIGKILL);
        kill_at = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    const size_t i = static_cast<size_t>(std::find(pids.begin(), pids.end(), done) - pids.begin());
    if (i == pids.size()) continue;
    running[i] = false;
    --left;
    if (exit_code(status) == 0 || first_failure != 0) continue;
    first_failure = exit_code(status);
    if (left == 0) break;
    // fputs: a closed stderr must not end the launcher (fmt::print throws).
    std::fputs(
        fmt::format("lazytrain launch: {} {}; stopping the other {}\n", processes[i].name,
                    describe(status), left == 1 ? "process" : fmt::format("{} processes", left))
            .c_str(),
        stderr);
    for (size_t j = 0; j < pids.size(); ++j)
      if (running[j]) ::kill(pids[j], SIGTERM);
    kill_at = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(kStopGraceS));
  }
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  std::signal(SIGHUP, old_hup);
  std::signal(SIGPIPE, old_pipe);
  return first_failure;
}

// A TCP port nothing listens on now (the kernel's pick), for rank 0's NCCL
// id; MASTER_PORT from the environment when set.
int free_port() {
  if (const char* set = std::getenv("MASTER_PORT")) return std::atoi(set);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  LT_CHECK(fd >= 0, "lazytrain launch: socket: ", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) == 0;
  ::close(fd);
  LT_CHECK(ok, "lazytrain launch: no free TCP port on 127.0.0.1 for MASTER_PORT");
  return ntohs(a.sin_port);
}

// The N ranks as this launcher starts them without mpirun.
std::vector<Process> forked_ranks(int nproc, const std::vector<std::string>& command) {
  const std::string port = std::to_string(free_port());
  std::vector<Process> ranks;
  for (int r = 0; r < nproc; ++r) {
    Process p{command, {}, fmt::format("rank {}", r)};
    p.env = {{"RANK", std::to_string(r)},       {"WORLD_SIZE", std::to_string(nproc)},
             {"LOCAL_RANK", std::to_string(r)}, {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
             {"MASTER_ADDR", "127.0.0.1"},      {"MASTER_PORT", port}};
    ranks.push_back(std::move(p));
  }
  return ranks;
}

// The ranks' shared record of the errors they printed (cli/ranks.h: ranks
// failing alike print once), made for the run and removed after it;
// exported as $LT_RANK_ERRORS for the ranks. None (every rank speaks) where
// no file can be made.
class RankErrorRecord {
 public:
  RankErrorRecord() {
    const char* tmp = std::getenv("TMPDIR");
    std::string name = fmt::format("{}/lazytrain-rank-errors-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    const int fd = ::mkstemp(name.data());
    if (fd < 0) return;
    ::close(fd);
    path_ = name;
    ::setenv("LT_RANK_ERRORS", path_.c_str(), 1);
  }
  ~RankErrorRecord() {
    if (path_.empty()) return;
    ::unlink(path_.c_str());
    ::unsetenv("LT_RANK_ERRORS");
  }
  RankErrorRecord(const RankErrorRecord&) = delete;
  RankErrorRecord& operator=(const RankErrorRecord&) = delete;

 private:
  std::string path_;
};

}  // namespace

void add_launch_command(CLI::App& app) {
  auto nproc = std::make_shared<int>(0);
  auto how = std::make_shared<std::string>("auto");
  auto* cmd = app.add_subcommand(
      "launch", "Run a command (train ...) as N local processes of one data-parallel run");
  cmd->add_option("--nproc", *nproc, "Processes (ranks) on this machine")
      ->required()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--via", *how,
                  "How the ranks start: mpirun, fork (torchrun's variables; GPUs only), or auto "
                  "(mpirun when it is in PATH)")
      ->check(CLI::IsMember({"auto", "mpirun", "fork"}));
  // Everything from the first argument launch does not know is the command.
  cmd->prefix_command();
  cmd->footer(
      "The command follows launch's own options: lazytrain launch --nproc 2 train run.yaml");
  cmd->callback([cmd, nproc, how] {
    const std::vector<std::string> command = cmd->remaining();
    LT_CHECK(!command.empty(),
             "lazytrain launch: no command; e.g. lazytrain launch --nproc 2 "
             "train run.yaml");
    // The other commands know nothing of ranks: N copies of eval printed N
    // results, N of convert wrote one folder N times at once.
    static constexpr std::array<std::string_view, 7> kOneProcess = {
        "info", "eval", "generate", "convert", "tokenize", "profile", "launch"};
    LT_CHECK(
        std::find(kOneProcess.begin(), kOneProcess.end(), command.front()) == kOneProcess.end(),
        "lazytrain launch: ", command.front(),
        " runs as one process (launch runs train, and plan to see each rank's plan); run "
        "`lazytrain ",
        command.front(), " ...` without launch");
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
    std::optional<RankErrorRecord> errors;
    if (*nproc > 1) errors.emplace();
    std::vector<std::string> rank_command = {self.string()};
    rank_command.insert(rank_command.end(), command.begin(), command.end());
    const fs::path mpirun = find_in_path("mpirun");
    std::string via = *how;
    if (via == "auto") via = mpirun.empty() ? "fork" : "mpirun";
    std::vector<Process> processes;
    if (*nproc == 1) {
      processes.push_back({rank_command, {}, "the process"});
    } else if (via == "mpirun") {
      LT_CHECK(!mpirun.empty(),
               "lazytrain launch --via mpirun: mpirun is not in PATH; install openmpi-bin "
               "(scripts/install-deps.sh)");
      // OpenMPI refuses to run as root unless told; a container's user often
      // is root, and asking for launch is the consent.
      if (::geteuid() == 0 && !std::getenv("OMPI_ALLOW_RUN_AS_ROOT")) {
        ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        fmt::print(stderr, "launch: running as root: OMPI_ALLOW_RUN_AS_ROOT is set for mpirun\n");
      }
      // --oversubscribe: N may exceed the cores MPI counts; --bind-to none:
      // each rank's thread pool may use every core (MPI would pin a rank to
      // one core).
      // Not -q: it would drop mpirun's page on MPI_Abort, but also its line
      // naming a rank that died without a word (killed).
      std::vector<std::string> argv = {mpirun.string(),
                                       "-np",
                                       std::to_string(*nproc),
                                       "--oversubscribe",
                                       "--bind-to",
                                       "none",
                                       "-x",
                                       "NCCL_NVLS_ENABLE",
                                       "-x",
                                       "LT_NUM_THREADS"};
      if (std::getenv("LT_RANK_ERRORS")) argv.insert(argv.end(), {"-x", "LT_RANK_ERRORS"});
      argv.insert(argv.end(), rank_command.begin(), rank_command.end());
      processes.push_back({argv, {}, "mpirun", /*stop_its_children=*/true, *nproc});
    } else {
      processes = forked_ranks(*nproc, rank_command);
    }
    const int code = run_all(processes, self);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace lt::cli
