#include "cli/ranks.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <exception>

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
    if (::write(quiet.stderr_fd(), line.data(), line.size()) < 0) {
      // Nothing left to tell the error to; the abort below still ends the run.
    }
    dist::abort_other_ranks();
    throw CLI::RuntimeError(1);  // printed already: main() exits 1 quietly
  }
}

}  // namespace lt::cli
