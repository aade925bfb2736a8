#include "train/weights_source.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "exec/memory_budget.h"
#include "io/hf_folder.h"
#include "models/hf_mapping.h"

namespace lt::train {

namespace fs = std::filesystem;

WeightsSource::WeightsSource(const TrainConfig& c, const fs::path& resume_dir) {
  if (!resume_dir.empty()) {
    from_ = resume_dir;
    reader_.emplace(resume_dir);
    return;
  }
  from_ = c.model.path;
  const bool has_weights =
      fs::exists(from_ / io::kHfWeightsFile) || fs::exists(from_ / io::kHfIndexFile);
  LT_CHECK(has_weights || c.model.init != "pretrained", "model.init: pretrained, but '",
           from_.string(), "' has no weights (no ", io::kHfWeightsFile, " or ", io::kHfIndexFile,
           "); use model.init auto or random to start from random weights");
  // auto starts at random only from a folder with config.json alone: one
  // that holds weights in another form is a mistake to name, not a start
  // from scratch.
  if (!has_weights && c.model.init == "auto") {
    const std::string other = io::weights_not_read(from_);
    LT_CHECK(other.empty(), "model.path '", from_.string(), "' holds ", other,
             "; model.init auto starts from random weights only when the folder holds no "
             "weights at all (set model.init: random to do that here)");
  }
  if (c.model.init == "random" || !has_weights) {
    // From config.json alone; the reader checks the same for the others.
    random_config_ = models::ModelConfig::from_file(from_ / "config.json");
    seed_ = c.train.seed;
    random_why_ = has_weights ? "model.init random" : from_.string() + " has no safetensors";
    return;
  }
  reader_.emplace(from_);
}

const models::ModelConfig& WeightsSource::config() const {
  return reader_ ? reader_->config() : *random_config_;
}

models::CausalLM WeightsSource::load(const std::vector<bool>& streamed, ProgressBar& log) {
  const models::ModelConfig& config = this->config();
  // Host memory holds the masters of the stages kept there, and of one
  // streamed stage at a time.
  int64_t kept = 0, largest_streamed = 0;
  bool any_streamed = false;
  for (int s = 0; s < static_cast<int>(config.num_hidden_layers) + 2; ++s) {
    const int64_t n = exec::stage_parameters(config, s);
    const bool out = static_cast<size_t>(s) < streamed.size() && streamed[s];
    any_streamed = any_streamed || out;
    out ? largest_streamed = std::max(largest_streamed, n) : kept += n;
  }
  io::check_model_fits_host(config, from_ / "config.json", DType::F32,
                            any_streamed ? kept + largest_streamed : -1);
  const std::string streaming =
      any_streamed ? " (the stages on disk as the run writes them out)" : "";
  if (!reader_) {
    Generator init_gen(seed_);
    log.message(fmt::format("weights: random (seed {}; {}){}", seed_, random_why_, streaming));
    return models::CausalLM::random(config, init_gen, DType::F32, streamed, starts_);
  }
  models::CausalLM model = models::CausalLM::uninitialized(config, DType::F32, streamed);
  reader_->check_against(model);
  if (const std::string warning = reader_->tied_head_warning(); !warning.empty())
    log.message(warning);
  for (size_t s = 0; s < model.stages().size(); ++s)
    if (s >= streamed.size() || !streamed[s]) reader_->read_stage(model, s);
  // Counted as the files hold them (GPT-2's fused c_attn is one tensor there).
  log.message(fmt::format("weights: {} tensors loaded from {}{}",
                          models::hf_rules(model.config()).size(), from_.string(), streaming));
  return model;
}

void WeightsSource::fill_stage(const models::CausalLM& model, size_t stage) const {
  if (reader_) {
    reader_->read_stage(model, stage);
    return;
  }
  const auto it = starts_.find(stage);
  LT_CHECK(it != starts_.end(), "weights: stage ", stage, " was not streamed at random init");
  model.fill_random_stage(stage, it->second);
}

}  // namespace lt::train
