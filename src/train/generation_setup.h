#pragma once
// What `lazytrain generate` and `lazytrain eval --task math` load before
// generating: the model on its device, its tokenizer, the EOS ids, and the
// rows' prompts rendered as training renders them.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/prompt_rows.h"
#include "data/tokenizer.h"
#include "models/causal_lm.h"

namespace lt::train {

struct GenerationModel {
  models::CausalLM model;
  std::optional<data::Tokenizer> tokenizer;
  std::filesystem::path tokenizer_path;  // where it was read (the model folder by default)
  std::vector<int32_t> eos_ids;          // generation_config.json / config.json
};

// `device`: auto (the first GPU in bf16 when this build has CUDA and one is
// visible, else the CPU in f32), cpu (f32) or cuda (bf16). `tokenizer`:
// a tokenizer.json or its folder; empty = the model folder. When
// `tokenizer_required` is false a folder without one loads no tokenizer.
GenerationModel load_generation_model(const std::string& model_dir, const std::string& tokenizer,
                                      const std::string& device, bool tokenizer_required,
                                      const std::string& needed_by);

// Refuses, naming `source` (the file, or --prompt) and the row's line, a row whose prompt leaves no
// room in the model's context for one new token, or holds an id outside the vocabulary. Prompts are
// never cut: an answer to half a question would be scored as if it answered the whole one.
void check_prompts_fit(const data::PromptSet& prompts, const std::string& source,
                       const models::ModelConfig& config, const std::string& model_dir);

}  // namespace lt::train
