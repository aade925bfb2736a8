#pragma once
// Progress on stderr: a single refreshed line on a terminal, plain lines
// (every `plain_every` steps and the last) when stderr is a file or pipe.
#include <chrono>
#include <cstdint>
#include <string>

namespace lt::train {

class ProgressBar {
 public:
  ProgressBar(int64_t first_step, int64_t total_steps);
  void update(int64_t step, double loss, double tokens_per_s, const std::string& extra = "");
  void finish();
  void message(const std::string& line);  // a line that does not break the bar

 private:
  int64_t first_step_, total_steps_;
  bool tty_;
  int64_t plain_every_;
  std::chrono::steady_clock::time_point start_;
  bool bar_shown_ = false;
};

}  // namespace lt::train
