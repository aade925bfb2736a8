#pragma once
// Note [Stopping eval and generate]: answering every row of a file
// (`eval --task math`, `generate --data`) can take an hour, and a Ctrl-C
// ended the process with every answer lost: generate printed nothing
// before the last row, and eval wrote --out only at the end. The rows are
// now written as they come, in row order, and the first SIGINT, SIGTERM
// or SIGHUP is a request: the batch in flight finishes, its rows are
// written, and the command says where they are and exits 128 + the signal.
// A second signal ends the process at once (the default action). A signal
// the command was started with ignored (nohup, `&` in a script) stays so.
#include <cstdint>

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

}  // namespace lt::cli
