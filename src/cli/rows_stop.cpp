#include "cli/rows_stop.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace lt::cli {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> requested_by{0};
struct sigaction previous[3];
bool caught[3] = {false, false, false};

extern "C" void note_stop(int sig) {
  requested_by.store(sig);
  constexpr char kSaid[] =
      "\nstop requested: the batch in flight finishes and the rows answered are kept (the same "
      "signal again ends it now)\n";
  const ssize_t ignored = ::write(STDERR_FILENO, kSaid, sizeof kSaid - 1);  // async-signal-safe
  (void)ignored;
}

}  // namespace

RowsStopRequest::RowsStopRequest() {
  requested_by.store(0);
  for (int i = 0; i < 3; ++i) {
    ::sigaction(kSignals[i], nullptr, &previous[i]);
    caught[i] = !(previous[i].sa_handler == SIG_IGN && (previous[i].sa_flags & SA_SIGINFO) == 0);
    if (!caught[i]) continue;
    struct sigaction action {};
    action.sa_handler = note_stop;
    // The second signal takes the default action: it ends the process.
    action.sa_flags = SA_RESTART | SA_RESETHAND;
    ::sigemptyset(&action.sa_mask);
    ::sigaction(kSignals[i], &action, nullptr);
  }
}

RowsStopRequest::~RowsStopRequest() {
  for (int i = 0; i < 3; ++i)
    if (caught[i]) ::sigaction(kSignals[i], &previous[i], nullptr);
}

void RowsStopRequest::throw_if_requested() const {
  if (const int sig = requested_by.load(); sig != 0) throw RowsStopped{sig};
}

void say_on_stderr(const std::string& text) {
  const std::string line = text + "\n";
  const ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

void end_by_signal(int sig) {
  std::fflush(stdout);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigemptyset(&default_action.sa_mask);
  ::sigaction(sig, &default_action, nullptr);
  sigset_t only;
  ::sigemptyset(&only);
  ::sigaddset(&only, sig);
  ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(sig);
  std::_Exit(128 + sig);  // a signal whose default action is not to end (none of the three)
}

}  // namespace lt::cli
