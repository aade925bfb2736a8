#pragma once
// Runs the built `lazytrain` with a command line, as a user's shell would,
// and keeps what it printed: for tests of the commands' output and exit
// status.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace lt::testing {

struct CliResult {
  int status = -1;  // the exit code; -1 when killed by a signal
  std::string out;  // stdout, with stderr when no stderr file was given
  std::string err;  // stderr, when a file for it was given
};

// `lazytrain ARGS` (ARGS as the shell reads them). With `stderr_file`,
// stderr goes there and comes back apart in `err`; without, it is in `out`.
// With `kill_after_s` > 0, a run still going after that many seconds is
// stopped (coreutils timeout: status 124), so that a test of a hang fails
// instead of hanging.
inline CliResult run_lazytrain(const std::string& args,
                               const std::filesystem::path& stderr_file = {},
                               int kill_after_s = 0) {
  const std::string cmd =
      (kill_after_s > 0 ? "timeout --kill-after=5 " + std::to_string(kill_after_s) + " " : "") +
      std::string(LT_BINARY_DIR) + "/lazytrain " + args +
      (stderr_file.empty() ? " 2>&1" : " 2>" + stderr_file.string());
  FILE* pipe = popen(cmd.c_str(), "r");
  CliResult r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  if (!stderr_file.empty()) {
    std::ifstream in(stderr_file);
    std::stringstream text;
    text << in.rdbuf();
    r.err = text.str();
  }
  return r;
}

}  // namespace lt::testing
