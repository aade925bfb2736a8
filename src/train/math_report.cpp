#include "train/math_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace lt::train {
namespace {

std::string percent_and_count(const MathEvalResult& m) {
  return fmt::format("{:.1f}% ({})", 100.0 * m.accuracy, m.correct);
}

std::string without_trailing_newlines(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

std::string math_accuracy_line(const std::optional<MathEvalAt>& before, const MathEvalAt& last,
                               int64_t steps_done) {
  const std::string head =
      fmt::format("held-out accuracy (exact match, {} problems): ", last.result.n);
  const std::string stale =
      last.step < steps_done
          ? fmt::format(
                " (the step-{} model's; the run ended at step {} without evaluating that "
                "one)",
                last.step, steps_done)
          : "";
  if (!before)
    return head + fmt::format("{} at step {}", percent_and_count(last.result), last.step) + stale;
  return head +
         fmt::format("{} before training -> {} after {} step{}", percent_and_count(before->result),
                     percent_and_count(last.result), last.step, last.step == 1 ? "" : "s") +
         stale;
}

std::string math_answers_text(const MathEvalAt& last, int problems) {
  std::string text;
  const auto& rows = last.result.rows;
  const size_t shown = std::min(rows.size(), static_cast<size_t>(std::max(problems, 0)));
  for (size_t i = 0; i < shown; ++i) {
    const MathEvalRow& row = rows[i];
    text += fmt::format(
        "{}\n  -> {}  ({}, the answer is {})\n", without_trailing_newlines(row.prompt),
        without_trailing_newlines(row.output), row.correct ? "right" : "wrong", row.reference);
  }
  return text;
}

}  // namespace lt::train
