#pragma once
// The longest row a model can be trained or evaluated on.
#include <cstdint>
#include <string>

#include "models/config.h"

namespace lt::models {

// Refuses rows of `seq_len` tokens that the model cannot attend over: more
// than its max_position_embeddings (past it a learned position table has no
// row, and rotary positions were never trained), or than Mistral's sliding
// window (ModelConfig::exact_context). `setting` names where the
// length came from ("--seq-len", "config key 'train.seq_len'"), `model`
// the model folder (or its config.json) the message names.
void check_seq_len_fits(int64_t seq_len, const std::string& setting, const ModelConfig& config,
                        const std::string& model);

// A model given as a folder or as its config.json: the config.json.
std::string model_config_file(const std::string& model);

}  // namespace lt::models
