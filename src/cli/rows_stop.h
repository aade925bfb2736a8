#pragma once
// Note [Stopping eval and generate]: answering every row of a file
// (`eval --task math`, `generate --data`) can take an hour, and a Ctrl-C
// ended the process with every answer lost: generate printed nothing
// before the last row, and eval wrote --out only at the end. The rows are
// now written as they come, in row order, and the first SIGINT, SIGTERM
// or SIGHUP is a request: the batch in flight finishes, every row answered
// is written (those past the first unanswered one after the others, each
// with its row or line), and the command says what it kept and ends by the
// signal, as the default action would (a shell script's loop stops on a
// child killed by SIGINT, not on one that exited 130). A second signal
// ends the process at once. A signal the command was started with ignored
// (nohup, `&` in a script) stays so. A stop in the last batch changes
// nothing: the command ends as it would have.
#include <cstdint>
#include <string>

namespace lt::cli {

// Thrown from a generation's on_batch_done once a stop is requested.
struct RowsStopped {
  int signal = 0;
};

class RowsStopRequest {
 public:
  RowsStopRequest();   // catches the three signals, unless ignored
  ~RowsStopRequest();  // restores what was there
  RowsStopRequest(const RowsStopRequest&) = delete;
  RowsStopRequest& operator=(const RowsStopRequest&) = delete;

  // Throws RowsStopped when a signal came.
  void throw_if_requested() const;
};

// Prints `text` on stderr; a closed terminal (SIGHUP's, EIO) is not an
// error here, where the command is ending.
void say_on_stderr(const std::string& text);

// Ends the process by `sig`'s default action, stdout flushed.
[[noreturn]] void end_by_signal(int sig);

}  // namespace lt::cli
