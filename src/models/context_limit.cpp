#include "models/context_limit.h"

#include "core/error.h"

namespace lt::models {

void check_seq_len_fits(int64_t seq_len, const std::string& setting, const ModelConfig& config,
                        const std::string& config_file) {
  if (seq_len <= config.max_position_embeddings) return;
  fail(setting, " ", seq_len, " is longer than the model's context: ", config_file,
       " has max_position_embeddings ", config.max_position_embeddings);
}

}  // namespace lt::models
