#include "models/context_limit.h"

#include <filesystem>

#include "core/error.h"

namespace lt::models {

std::string model_config_file(const std::string& model) {
  const std::filesystem::path p(model);
  return (std::filesystem::is_directory(p) ? p / "config.json" : p).string();
}

void check_seq_len_fits(int64_t seq_len, const std::string& setting, const ModelConfig& config,
                        const std::string& model) {
  if (seq_len <= config.exact_context()) return;
  if (seq_len <= config.max_position_embeddings)
    fail(setting, " ", seq_len,
         " is longer than the model's sliding window: ", model_config_file(model),
         " has sliding_window ", config.attention_window,
         ", and lazytrain computes full causal attention, which is the window's only up to that "
         "many tokens");
  fail(setting, " ", seq_len, " is longer than the model's context: ", model_config_file(model),
       " has max_position_embeddings ", config.max_position_embeddings);
}

}  // namespace lt::models
