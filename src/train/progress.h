#pragma once
// Progress on stderr: a single refreshed line on a terminal, plain lines
// (every `plain_every` steps and the last) when stderr is a file or pipe.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace lt::train {

// Writes `text` to `out` and never fails the run: a training run's output
// that can no longer be written (a `| tee` stopped by the same Ctrl-C, a
// closed ssh terminal) must not stop it before it saves (Note [Stopping a
// run], trainer.cpp). fmt::print throws on a short write.
void print_text(std::FILE* out, std::string_view text) noexcept;

// TFLOP/s for people: whole numbers from 10 up, two significant digits
// below (small models on the CPU run well under one).
std::string format_tflops(double tflops);

class ProgressBar {
 public:
  ProgressBar(int64_t first_step, int64_t total_steps);
  // tflops: 6 x parameters x tokens_per_s / 1e12 (docs/design.md, "Conventions").
  // `loss` is absent for a step without a trained token (nothing computed).
  void update(int64_t step, std::optional<double> loss, double tokens_per_s, double tflops,
              const std::string& extra = "");
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
