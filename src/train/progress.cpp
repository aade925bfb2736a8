#include "train/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

namespace lt::train {

void print_text(std::FILE* out, std::string_view text) noexcept {
  [[maybe_unused]] const size_t written = std::fwrite(text.data(), 1, text.size(), out);
}

namespace {

// The terminal's width in columns; 0 when unknown.
int terminal_columns() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0) return size.ws_col;
  return 0;
}

}  // namespace

std::string format_tflops(double tflops) {
  return tflops >= 10 ? fmt::format("{:.0f}", tflops) : fmt::format("{:.2g}", tflops);
}

ProgressBar::ProgressBar(int64_t first_step, int64_t total_steps)
    : first_step_(first_step),
      total_steps_(total_steps),
      tty_(isatty(STDERR_FILENO) != 0),
      // About 20 plain lines per run, never fewer than one per 100 steps.
      plain_every_(std::clamp<int64_t>(total_steps / 20, 1, 100)),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(int64_t step, std::optional<double> loss, double tokens_per_s,
                         double tflops, const std::string& extra) {
  const int64_t done = step + 1;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int64_t run_steps = std::max<int64_t>(done - first_step_, 1);
  const double eta =
      elapsed / static_cast<double>(run_steps) * static_cast<double>(total_steps_ - done);
  const int width = 24;
  const int filled = static_cast<int>(width * done / std::max<int64_t>(total_steps_, 1));
  std::string line =
      fmt::format("step {:>5}/{} loss {} | {:.0f} tok/s, {} TFLOP/s | ETA {:.0f}s{}", done,
                  total_steps_, loss ? fmt::format("{:.4f}", *loss) : std::string("-"),
                  tokens_per_s, format_tflops(tflops), eta, extra);
  if (tty_) {
    // A line wider than the terminal wraps, and each refresh then leaves a
    // cut copy behind: the bar goes first, then the line's end.
    std::string shown =
        fmt::format("[{}{}] {}", std::string(filled, '#'), std::string(width - filled, '.'), line);
    const size_t columns = static_cast<size_t>(terminal_columns());
    if (columns > 0 && shown.size() >= columns) shown = line.substr(0, columns - 1);
    print_text(stderr, "\r" + shown + "\x1b[K");
    bar_shown_ = true;
  } else if (done % plain_every_ == 0 || done == total_steps_ || step == first_step_) {
    print_text(stderr, line + "\n");
  }
}

void ProgressBar::message(const std::string& line) {
  if (tty_ && bar_shown_) print_text(stderr, "\r\x1b[K");
  print_text(stderr, line + "\n");
}

void ProgressBar::finish() {
  if (tty_ && bar_shown_) print_text(stderr, "\n");
  bar_shown_ = false;
}

}  // namespace lt::train
