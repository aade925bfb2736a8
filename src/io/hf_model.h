#pragma once
// A Hugging Face model folder as a CausalLM: config.json plus safetensors
// weights (single file or sharded), in and out.
#include <filesystem>

#include "io/hf_folder.h"
#include "models/causal_lm.h"

namespace lt::io {

// A Hugging Face folder opened for loading a stage at a time (Note [Stage
// states on disk], "the start"): config.json read, the weight files mapped
// and their sizes checked against it; nothing read yet.
class HfModelReader {
 public:
  explicit HfModelReader(const std::filesystem::path& folder);
  const models::ModelConfig& config() const { return config_; }
  std::filesystem::path config_path() const { return weights_.folder() / "config.json"; }
  // Throws lt::Error naming the tensor unless the files hold every tensor
  // `model` (of this config) needs, of a floating dtype and the shape its
  // parameters imply, and nothing it does not have. Reads shapes only, so
  // `model` may hold parameters without memory.
  void check_against(const models::CausalLM& model) const;
  // Copies the files' tensors of the parameters stage `stage` of `model`
  // lists (which must have memory) into them, converted to their dtype.
  void read_stage(const models::CausalLM& model, size_t stage) const;
  // A warning naming the tensor when config.json ties the head to the
  // embedding and the files also hold an lm_head.weight that differs from
  // it (rows sampled): that head is not read, where transformers may load
  // it untied. "" otherwise (no such tensor, or the embedding's copy).
  std::string tied_head_warning() const;

 private:
  models::ModelConfig config_;
  HfWeights weights_;
};

// Reads DIR/config.json and the weights, converted to `dtype`. Every tensor
// the config implies must be present with its shape; tensors the model does
// not have are refused (known buffers such as GPT-2's attn.bias aside).
models::CausalLM load_hf_model(const std::filesystem::path& folder, DType dtype = DType::F32);

// Throws lt::Error naming `config_path` when the weights `config` implies,
// in `dtype`, cannot fit in the host memory free (core/host_memory.h):
// before they are allocated, whose failure would name no file.
// `in_memory`: the parameters that get memory at once, when not all
// (the stages kept in host memory and one streamed to disk at a time).
void check_model_fits_host(const models::ModelConfig& config,
                           const std::filesystem::path& config_path, DType dtype,
                           int64_t in_memory = -1);

// config.json of `model` saved in `dtype`, atomically. With
// `source_config` (the config.json the model was read or initialised from)
// it is that file with only the weights' dtype changed ("torch_dtype", and
// "dtype" where the file has it): transformers reads fields this program
// does not keep (initializer_range, max_window_layers, custom keys), so a
// config rebuilt from ModelConfig would change or drop them. A source that
// is missing, or whose fields describe another model than `model`, gives
// ModelConfig::to_json() instead: config.json always describes the weights
// written beside it.
void save_hf_config(const models::CausalLM& model, const std::filesystem::path& folder, DType dtype,
                    const std::filesystem::path& source_config = {});

// Writes config.json (as save_hf_config, from `source_config`) and the
// weights in `dtype`, sharded above options.max_shard_bytes. Each file is
// written atomically.
void save_hf_model(const models::CausalLM& model, const std::filesystem::path& folder, DType dtype,
                   const HfWriteOptions& options = {},
                   const std::filesystem::path& source_config = {});

}  // namespace lt::io
