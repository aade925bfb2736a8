#pragma once
// A checkpoint's weights and optimizer states written from an executor
// that keeps some stages of them on disk (exec/staged_states.h): the same
// files, byte for byte, as io::save_hf_model (f32) and
// io::write_safetensors write from host memory, with each disk stage read
// into host memory once, written where its tensors go, and let go before
// the next (io/staged_safetensors.h).
#include <filesystem>
#include <string>

#include "exec/staged_states.h"
#include "models/causal_lm.h"

namespace lt::train {

// Writes config.json (from `source_config` as io::save_hf_config writes
// it), the model's weights (f32, Hugging Face names and layout, sharded as
// save_hf_model shards them) and `optimizer_file` (the tensors of
// `optimizer_state`, in its order) into `dir`, a folder that is there:
// it is not made again if deleted meanwhile.
void write_staged_checkpoint_tensors(const std::filesystem::path& dir,
                                     const models::CausalLM& model,
                                     const optim::NamedTensors& optimizer_state,
                                     exec::StagedStates& staged, const std::string& optimizer_file,
                                     const std::filesystem::path& source_config = {});

}  // namespace lt::train
