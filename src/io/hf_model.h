#pragma once
// A Hugging Face model folder as a CausalLM: config.json plus safetensors
// weights (single file or sharded), in and out.
#include <filesystem>

#include "io/hf_folder.h"
#include "models/causal_lm.h"

namespace lt::io {

// Reads DIR/config.json and the weights, converted to `dtype`. Every tensor
// the config implies must be present with its shape; tensors the model does
// not have are refused (known buffers such as GPT-2's attn.bias aside).
models::CausalLM load_hf_model(const std::filesystem::path& folder, DType dtype = DType::F32);

// Throws lt::Error naming `config_path` when the weights `config` implies,
// in `dtype`, cannot fit in the host memory free (core/host_memory.h):
// before they are allocated, whose failure would name no file.
void check_model_fits_host(const models::ModelConfig& config,
                           const std::filesystem::path& config_path, DType dtype);

// config.json of `model` saved in `dtype` (its torch_dtype), atomically.
void save_hf_config(const models::CausalLM& model, const std::filesystem::path& folder,
                    DType dtype);

// Writes config.json (torch_dtype = `dtype`) and the weights in `dtype`,
// sharded above options.max_shard_bytes. Each file is written atomically.
void save_hf_model(const models::CausalLM& model, const std::filesystem::path& folder, DType dtype,
                   const HfWriteOptions& options = {});

}  // namespace lt::io
