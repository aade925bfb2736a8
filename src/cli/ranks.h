#pragma once
// How a rank of a run of several processes behaves at the command line:
// rank 0 speaks for the run; the others stay quiet unless they fail, and a
// rank that fails stops the others rather than leave them waiting for it.
#include <functional>
#include <string>

namespace lt::cli {

// Runs `body`. On a rank other than 0 its stdout and stderr go to
// /dev/null while it runs. An error on any rank is printed (to the real
// stderr) naming the rank, once when several ranks fail alike under
// `lazytrain launch` (its $LT_RANK_ERRORS file), and an MPI job is then aborted, so every rank
// exits; then CLI::RuntimeError(1). A one-process run just rethrows to
// main().
void run_as_rank(const std::function<void()>& body);

// main()'s error line, "lazytrain: error: TEXT\n" on stderr; in a rank of
// several processes "lazytrain: rank R of N: error: TEXT\n", once for the
// ranks failing alike (a config error every rank finds before
// run_as_rank). Never throws.
void print_error(const std::string& text);

}  // namespace lt::cli
