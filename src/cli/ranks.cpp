#include "cli/ranks.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>

#include "dist/process.h"

namespace lt::cli {

namespace {

// Points stdout and stderr at /dev/null for its lifetime; `stderr_fd()` is
// the real stderr meanwhile.
class QuietOutput {
 public:
  explicit QuietOutput(bool quiet) {
    if (!quiet) return;
    std::fflush(stdout);
    std::fflush(stderr);
    saved_out_ = ::dup(STDOUT_FILENO);
    saved_err_ = ::dup(STDERR_FILENO);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null < 0) return;
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    ::close(null);
  }
  ~QuietOutput() {
    if (saved_out_ < 0) return;
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(saved_out_, STDOUT_FILENO);
    ::dup2(saved_err_, STDERR_FILENO);
    ::close(saved_out_);
    ::close(saved_err_);
  }
  QuietOutput(const QuietOutput&) = delete;
  QuietOutput& operator=(const QuietOutput&) = delete;
  int stderr_fd() const { return saved_err_ >= 0 ? saved_err_ : STDERR_FILENO; }

 private:
  int saved_out_ = -1, saved_err_ = -1;
};

// Whether no other rank of this run has reported `message`: ranks that fail
// alike (a config error every rank finds) print it once. The record is the
// file `lazytrain launch` names in $LT_RANK_ERRORS (messages ended by NUL,
// appended under flock); without it (mpirun run by hand) every rank speaks.
bool first_to_report(const std::string& message) {
  const char* path = std::getenv("LT_RANK_ERRORS");
  if (path == nullptr || *path == '\0') return true;
  const int fd = ::open(path, O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0) return true;
  bool first = true;
  if (::flock(fd, LOCK_EX) == 0) {
    std::string seen;
    char chunk[4096];
    ssize_t n;
    while ((n = ::pread(fd, chunk, sizeof chunk, static_cast<off_t>(seen.size()))) > 0)
      seen.append(chunk, static_cast<size_t>(n));
    const std::string record = message + '\0';
    first = (std::string(1, '\0') + seen).find('\0' + record) == std::string::npos;
    if (first && ::write(fd, record.data(), record.size()) < 0) {
      // Unrecorded: another rank failing alike prints it too.
    }
  }
  ::close(fd);  // releases the lock
  return first;
}

}  // namespace

void run_as_rank(const std::function<void()>& body) {
  const dist::World& world = dist::this_world();
  if (!world.distributed()) return body();
  QuietOutput quiet(world.rank != 0);
  try {
    body();
  } catch (const std::exception& e) {
    const std::string line =
        fmt::format("lazytrain: rank {} of {}: error: {}\n", world.rank, world.size, e.what());
    if (first_to_report(e.what()) && ::write(quiet.stderr_fd(), line.data(), line.size()) < 0) {
      // Nothing left to tell the error to; the abort below still ends the run.
    }
    dist::abort_other_ranks();
    throw CLI::RuntimeError(1);  // printed already: main() exits 1 quietly
  }
}

void print_error(const std::string& text) {
  std::string line = "lazytrain: error: " + text + "\n";
  dist::World world;
  try {
    world = dist::this_world();
  } catch (const std::exception&) {
    // The environment's launch variables are themselves the error (half of
    // torchrun's set): said as one process says it.
  }
  if (world.distributed()) {
    if (!first_to_report(text)) return;
    line = fmt::format("lazytrain: rank {} of {}: error: {}\n", world.rank, world.size, text);
  }
  std::fputs(line.c_str(), stderr);
}

}  // namespace lt::cli
