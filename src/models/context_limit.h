#pragma once
// The longest row a model can be trained or evaluated on.
#include <cstdint>
#include <string>

#include "models/config.h"

namespace lt::models {

// Refuses rows of `seq_len` tokens that the model cannot attend over: more
// than its max_position_embeddings (past it a learned position table has no
// row, and rotary positions were never trained). `setting` names where the
// length came from ("--seq-len", "config key 'train.seq_len'"),
// `config_file` the model's config.json.
void check_seq_len_fits(int64_t seq_len, const std::string& setting, const ModelConfig& config,
                        const std::string& config_file);

}  // namespace lt::models
