#pragma once
// What a run writes besides checkpoints: metrics.jsonl and its TensorBoard
// copy, the loss curve, the closing sample and the lines that say where
// these are.
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/batching.h"
#include "data/tokenizer.h"
#include "exec/step_stats.h"
#include "io/tensorboard_events.h"
#include "models/causal_lm.h"
#include "train/run_plan.h"

namespace lt::train {

// One JSON object per optimizer step, flushed as written. On resume the
// lines of steps at or after `first_step` (from the interrupted run) are
// dropped first, so the file reads as one uninterrupted run. A failed
// write (a full disk) throws naming the file.
// Each line also goes to TensorBoard, as tensorboard_scalars, in a new
// event file under tensorboard_dir(path's folder). The file starts with a
// restart mark at `first_step`, so that TensorBoard, like the lines, drops
// what an earlier run in the same folder logged from that step on.
// A TensorBoard write that fails (a full disk) ends TensorBoard logging
// with one warning to `warn` (null: stderr) and the run goes on: the event
// file is a copy of metrics.jsonl, and losing it loses no work.
class MetricsWriter {
 public:
  MetricsWriter(const std::filesystem::path& path, bool resuming, int64_t first_step,
                std::function<void(const std::string&)> warn = nullptr);
  void write(const nlohmann::json& line);

 private:
  // Runs `write` on the TensorBoard writer while there is one; a failure
  // warns and ends TensorBoard logging. `when`: "at step N", for the warning.
  void to_tensorboard(const std::function<void(io::TensorBoardEventWriter&)>& write,
                      const std::string& when);
  void say(const std::string& warning) const;  // to warn_, else stderr

  std::filesystem::path path_;
  std::ofstream out_;
  std::optional<io::TensorBoardEventWriter> tensorboard_;
  std::function<void(const std::string&)> warn_;
};

// Where a run's TensorBoard event files go: out_dir/tb.
std::filesystem::path tensorboard_dir(const std::filesystem::path& out_dir);

// A metrics line (step_json and what the trainer adds) as TensorBoard
// scalars: every number but "step" (the event's step), grouped by what it
// measures: train/ (loss, lr, grad_norm, tokens), speed/ (tokens/s, TFLOP/s,
// step seconds, predicted), time/ (the step's split), memory/ (peaks in GB
// per space), eval/; a number this list does not know goes under other/.
// Strings and flags ("executor", "skipped") are left out.
std::vector<io::TensorBoardScalar> tensorboard_scalars(const nlohmann::json& line);

// A memory space's name in what a run on `device` prints: the training
// device's memory (MemorySpace::Gpu) is "gpu" on CUDA and "device" when the
// CPU stands in for the GPU (host memory under the device's budget), as
// metrics.jsonl's peak_bytes names it; "host" and "disk" otherwise.
const char* memory_space_label(exec::MemorySpace space, const Device& device);

// The line `train` prints once the plan is made: the executor and device,
// the bytes it plans per memory space and the predicted tokens/s
// (batch_size * seq_len tokens per predicted step) when the planner
// predicted one.
std::string run_plan_line(const RunPlan& plan);

// What a prediction of `plan` is of, beside it in the plan and summary
// lines: "" for its own device's (a GPU run, FLOP model or GPU-measured
// stage times); " on the profile's GPU, not this CPU" for the CPU
// stand-in priced as the profile's GPU (the FLOP model at gpu_tflops);
// " from stage times measured on a CPU" where the profile's stage times
// were timed on a CPU (`lazytrain profile --model` without a GPU).
std::string prediction_basis(const RunPlan& plan);

// A sample's decoded text as a terminal can show it: control characters
// other than newline and tab (a weight-blown model's NUL bytes, escape
// sequences) as \xNN; text of white space and control characters alone as
// "(N tokens that print as white space or nothing)".
std::string sample_for_terminal(const std::string& decoded, size_t tokens);

// The lines `train` ends with: where the outputs are, how to watch them in
// TensorBoard and the last checkpoint (empty when none was saved).
// `traced`: the run was the streaming executor's, which writes trace.json.
std::string where_to_look(const std::filesystem::path& out_dir,
                          const std::filesystem::path& last_checkpoint, bool traced);

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
  // What the prediction is of (prediction_basis): the line says so beside it.
  void set_prediction_basis(std::string basis) { prediction_basis_ = std::move(basis); }
  // The median of the steps' "cpu_update_gparams_per_s" (G parameters a
  // second), and how many steps had one (0: none, and the median is 0).
  double median_cpu_update_gparams_per_s() const;
  size_t cpu_update_steps() const { return cpu_update_gparams_per_s_.size(); }

 private:
  int64_t steps_ = 0, without_targets_ = 0;  // every step added; those without a target
  // Of the steps with one (1-based): the medians leave out the first.
  int64_t first_step_ = 0, second_step_ = 0, last_step_ = 0, skipped_ = 0;
  std::vector<double> tokens_per_s_, tflops_, step_s_;
  std::vector<double> cpu_update_gparams_per_s_;  // the streaming executor's, where counted
  double predicted_step_s_ = 0;                   // the last line's, when any had one
  std::string prediction_basis_;
  int64_t planned_gpu_peak_ = 0;  // "predicted_gpu_peak_bytes", likewise
  std::map<std::string, int64_t> peaks_;
};
std::string run_summary(const std::vector<nlohmann::json>& steps);

// loss.png from metrics.jsonl with gnuplot when it is installed; returns
// false (and writes nothing) when it is not.
bool plot_loss_curve(const std::filesystem::path& metrics, const std::filesystem::path& png);

// Where print_sample's greedy continuation of `sample` stops: the special
// token that ends its trained answer (a chat template's turn end, which the
// model learned to stop at), else the first of `eos_ids`; -1 when neither.
// `prompt_len`: the sample's tokens before its first trained label.
int32_t sample_stop_token(const std::vector<int64_t>& eos_ids, const data::Tokenizer& tokenizer,
                          const data::Sample& sample, size_t prompt_len);

// Prints the sample's prompt (its tokens up to the first trained label) and
// the model's greedy continuation.
void print_sample(const models::CausalLM& model, const data::Tokenizer& tokenizer,
                  const data::Sample& sample);

}  // namespace lt::train
