#pragma once
// Training checkpoints: out.dir/step-N/ holds a Hugging Face folder (config,
// f32 safetensors = the master weights, tokenizer files) plus the training
// state (optimizer.safetensors, trainer_state.json). A checkpoint is built
// in a hidden temporary folder and renamed into place, so a crash mid-save
// never leaves a damaged step-N; trainer_state.json is written last, and a
// folder without it is never taken for a checkpoint.
#include <filesystem>
#include <map>
#include <string>

#include "data/batching.h"
#include "models/causal_lm.h"

namespace lt::train {

struct TrainerState {
  int64_t step = 0;  // optimizer steps completed
  data::SamplerState sampler;
  int64_t consecutive_bad_steps = 0;
};

struct CheckpointContents {
  std::filesystem::path dir;
  TrainerState state;
  std::map<std::string, Tensor> optimizer_state;
};

// Writes out_dir/step-<state.step>/ and removes all but the newest
// `keep_last` checkpoints. Returns the folder written.
std::filesystem::path save_checkpoint(
    const std::filesystem::path& out_dir, const models::CausalLM& model,
    const std::vector<std::pair<std::string, Tensor>>& optimizer_state, const TrainerState& state,
    const std::filesystem::path& tokenizer_dir, const std::string& config_yaml, int64_t keep_last);

// "latest" = the newest complete checkpoint in out_dir; anything else is a
// checkpoint folder. Throws naming what is missing.
std::filesystem::path resolve_checkpoint(const std::string& resume,
                                         const std::filesystem::path& out_dir);

// The training state and optimizer state of a checkpoint (the weights are
// read with io::load_hf_model).
CheckpointContents read_checkpoint(const std::filesystem::path& dir);

}  // namespace lt::train
