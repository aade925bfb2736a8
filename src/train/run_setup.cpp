#include "train/run_setup.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
#include "io/hf_folder.h"
#include "io/hf_model.h"

namespace lt::train {

namespace fs = std::filesystem;

fs::path tokenizer_dir_of(const TrainConfig& c) {
  return fs::path(c.data.tokenizer.empty() ? c.model.path : c.data.tokenizer);
}

std::vector<data::Sample> load_samples(const TrainConfig& c, const std::string& path,
                                       const data::Tokenizer* tokenizer, ProgressBar* log) {
  data::DatasetOptions options;
  options.format = c.data.format;
  options.template_name = c.data.template_name;
  options.train_on_prompt = c.data.train_on_prompt;
  options.strict = c.data.strict;
  options.prompt_field = c.data.prompt_field;
  options.response_field = c.data.response_field;
  options.tokenizer_path = tokenizer_dir_of(c);  // tokenizer_config.json: template and EOS
  data::DatasetReport report;
  auto samples = data::load_dataset(path, tokenizer, options, &report);
  log->message(fmt::format("data: {} samples from {} rows of {} (format {}, template {}){}",
                           report.samples, report.rows, path, report.format, report.template_name,
                           report.skipped ? fmt::format(", {} skipped", report.skipped) : ""));
  for (size_t i = 0; i < report.problems.size() && i < 5; ++i) {
    log->message("  skipped: " + report.problems[i]);
  }
  return samples;
}

ResumeChanges compare_with_checkpoint(const TrainConfig& c, const fs::path& resume_dir,
                                      ProgressBar& log) {
  ResumeChanges changes;
  const fs::path saved_path = resume_dir / "train_config.yaml";
  if (resume_dir.empty() || !fs::is_regular_file(saved_path)) return changes;
  TrainConfig saved = read_train_config_unchecked(saved_path);
  const bool dtype_auto = c.train.dtype == "auto" || saved.train.dtype == "auto";
  for (const std::string& change : config_differences(saved, c)) {
    // Extending the run, or writing it elsewhere, is what a resume is for.
    if (change.rfind("train.steps:", 0) == 0 || change.rfind("out.dir:", 0) == 0) continue;
    if (dtype_auto && change.rfind("train.dtype:", 0) == 0) continue;
    log.message("resume: " + change + " (was the checkpoint's)");
  }
  changes.optimizer =
      saved.optim.name != c.optim.name ||
      (c.optim.name == "adamw8bit" && (saved.optim.block_size != c.optim.block_size ||
                                       saved.optim.min_8bit_numel != c.optim.min_8bit_numel));
  const auto& a = saved.data;
  const auto& b = c.data;
  changes.data = a.path != b.path || a.format != b.format || a.template_name != b.template_name ||
                 a.tokenizer != b.tokenizer || a.train_on_prompt != b.train_on_prompt ||
                 a.pack != b.pack || a.prompt_field != b.prompt_field ||
                 a.response_field != b.response_field || saved.train.seed != c.train.seed;
  return changes;
}

models::CausalLM load_weights(const TrainConfig& c, const fs::path& resume_dir, ProgressBar& log) {
  const auto count_line = [&](const models::CausalLM& m, const fs::path& from) {
    log.message(
        fmt::format("weights: {} tensors loaded from {}", m.parameters().size(), from.string()));
  };
  if (!resume_dir.empty()) {
    models::CausalLM model = io::load_hf_model(resume_dir, DType::F32);
    count_line(model, resume_dir);
    return model;
  }
  const fs::path dir = c.model.path;
  const bool has_weights =
      fs::exists(dir / io::kHfWeightsFile) || fs::exists(dir / io::kHfIndexFile);
  LT_CHECK(has_weights || c.model.init != "pretrained", "model.init: pretrained, but '",
           dir.string(), "' has no weights (no ", io::kHfWeightsFile, " or ", io::kHfIndexFile,
           "); use model.init auto or random to start from random weights");
  if (c.model.init == "random" || !has_weights) {
    // Allocated from config.json alone; load_hf_model checks the same for
    // the others.
    const fs::path path = dir / "config.json";
    models::ModelConfig config = models::ModelConfig::from_file(path);
    io::check_model_fits_host(config, path, DType::F32);
    Generator init_gen(c.train.seed);
    log.message(
        fmt::format("weights: random (seed {}; {})", c.train.seed,
                    has_weights ? "model.init random" : dir.string() + " has no safetensors"));
    return models::CausalLM::random(config, init_gen, DType::F32);
  }
  models::CausalLM model = io::load_hf_model(dir, DType::F32);
  count_line(model, dir);
  return model;
}

}  // namespace lt::train
