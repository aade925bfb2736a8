#pragma once
// What a run writes besides checkpoints: metrics.jsonl, the loss curve and
// the closing sample.
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/batching.h"
#include "data/tokenizer.h"
#include "exec/step_stats.h"
#include "models/causal_lm.h"

namespace lt::train {

// One JSON object per optimizer step, flushed as written. On resume the
// lines of steps at or after `first_step` (from the interrupted run) are
// dropped first, so the file reads as one uninterrupted run. A failed
// write (a full disk) throws naming the file.
class MetricsWriter {
 public:
  MetricsWriter(const std::filesystem::path& path, bool resuming, int64_t first_step);
  void write(const nlohmann::json& line);

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

// The metrics line of a step: every StepStats field (seconds as "step_s";
// "skipped" only when true),
// plus tflops = 6 * parameters * tokens / seconds, and "predicted_step_s"
// (the planner's prediction for exec.schedule auto) when it is > 0.
nlohmann::json step_json(int64_t step, const exec::StepStats& stats, double lr, double parameters,
                         double predicted_step_s = 0);

// The closing line of a run, from its steps' metrics lines (step_json):
// how many steps, the medians of tokens/s, TFLOP/s (6 x parameters x
// tokens/s) and step seconds over the steps after the run's first (which
// pays one-time set-up; all of them when there is only one), the planner's
// predicted step when the lines have one, how many steps were skipped
// (non-finite: no update; they count in the medians), and the peak bytes
// per memory space over every step, the device's beside the plan's
// ("predicted_gpu_peak_bytes", which the trainer adds for exec.schedule
// auto). Empty when there are no lines.
// RunSummary is fed each step's line as it is written and keeps only the
// figures the summary needs (a long run's lines stay on disk).
class RunSummary {
 public:
  void add(const nlohmann::json& step);
  std::string line() const;  // empty before any step

 private:
  int64_t first_step_ = 0, last_step_ = 0, skipped_ = 0;
  std::vector<double> tokens_per_s_, tflops_, step_s_;
  double predicted_step_s_ = 0;   // the last line's, when any had one
  int64_t planned_gpu_peak_ = 0;  // "predicted_gpu_peak_bytes", likewise
  std::map<std::string, int64_t> peaks_;
};
std::string run_summary(const std::vector<nlohmann::json>& steps);

// loss.png from metrics.jsonl with gnuplot when it is installed; returns
// false (and writes nothing) when it is not.
bool plot_loss_curve(const std::filesystem::path& metrics, const std::filesystem::path& png);

// Prints the sample's prompt (its tokens up to the first trained label) and
// the model's greedy continuation.
void print_sample(const models::CausalLM& model, const data::Tokenizer& tokenizer,
                  const data::Sample& sample);

}  // namespace lt::train
