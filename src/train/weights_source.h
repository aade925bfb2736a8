#pragma once
// Where a run's weights come from: a checkpoint on resume, else model.path's
// safetensors or random init (model.init). Opened from config.json before
// the run's plan exists, so that the stages the plan puts on disk can get
// their masters a stage at a time, as the streaming executor writes them
// out (Note [Stage states on disk], "the start"), instead of all at once.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/random.h"
#include "io/hf_model.h"
#include "models/causal_lm.h"
#include "train/config.h"
#include "train/progress.h"

namespace lt::train {

class WeightsSource {
 public:
  // model.init: auto loads the folder's weights when it has safetensors and
  // initializes randomly from config.json otherwise; pretrained requires the
  // weights; random ignores them. A resume loads the checkpoint's. Reads
  // config.json and maps the weight files (nothing read yet).
  WeightsSource(const TrainConfig& c, const std::filesystem::path& resume_dir);
  const models::ModelConfig& config() const;

  // The model in f32, every master in host memory but those of the stages
  // flagged in `streamed` (per stage of the model; empty: none), which get
  // their shapes without memory until fill_stage(). The values are what a
  // load of the whole model gives, bit for bit. One line on `log` says
  // where they came from.
  models::CausalLM load(const std::vector<bool>& streamed, ProgressBar& log);
  // Writes the masters of a stage load() streamed into `model` (its
  // parameters have memory by now); for StreamingOptions::fill_masters.
  void fill_stage(const models::CausalLM& model, size_t stage) const;

 private:
  std::filesystem::path from_;               // the folder read
  std::optional<io::HfModelReader> reader_;  // safetensors; else random init
  std::optional<models::ModelConfig> random_config_;
  uint64_t seed_ = 0;
  std::string random_why_;              // for the log line
  std::map<size_t, Generator> starts_;  // random: the generator at each streamed stage's start
};

}  // namespace lt::train
