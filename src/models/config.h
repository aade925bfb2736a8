#pragma once
// ModelConfig: the shape of a model, read from a Hugging Face config.json.
// It is the one source of truth for every size in the model (docs/design.md,
// "Conventions").
//
// Both styles of config.json are read:
//   - transformers 4.x (most published checkpoints): top-level rope_theta,
//     rope_scaling {"rope_type" | "type": ...}, torch_dtype;
//   - transformers 5.x: rope_parameters {"rope_theta", "rope_type", ...},
//     dtype, layer_types.
// Defaults for absent keys are those of the transformers config class of
// each family, so that a config means here what it means there. Anything
// lazytrain does not compute (sliding windows that are on, rope types other
// than default and llama3, other activations) is refused with a message
// naming the file and the field, rather than silently computing something
// else.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace lt::models {

enum class ModelFamily { Llama, Mistral, Qwen2, Qwen3, Gpt2 };
const char* model_type_name(ModelFamily family);  // "llama", ...

// gelu_new and gelu_pytorch_tanh are the same function (the tanh
// approximation of GELU); both names are kept so that to_json writes back
// what it read.
enum class Activation { Silu, GeluNew, GeluPytorchTanh };
const char* activation_name(Activation act);

enum class RopeType { Default, Llama3 };

// Llama 3.1's frequency-dependent rescaling of the rotary frequencies.
struct RopeScaling {
  RopeType type = RopeType::Default;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  bool operator==(const RopeScaling&) const = default;
};

struct ModelConfig {
  ModelFamily family = ModelFamily::Llama;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;  // gpt2: n_positions, the learned position table
  // Mistral's sliding_window when shorter than max_position_embeddings; 0:
  // none. lazytrain computes full causal attention, which is the window's
  // exactly while a sequence is no longer than it: the window bounds the
  // sequences a run takes (exact_context), rather than the model refused.
  int64_t attention_window = 0;
  double rope_theta = 10000.0;  // unused by gpt2
  RopeScaling rope_scaling;
  double norm_eps = 1e-6;  // rms_norm_eps; gpt2: layer_norm_epsilon
  bool tie_word_embeddings = false;
  bool attention_bias = false;      // q, k, v projections
  bool attention_out_bias = false;  // o projection
  bool mlp_bias = false;
  bool qk_norm = false;  // qwen3: RMSNorm over head_dim on q and k before rope
  Activation hidden_act = Activation::Silu;
  // "float32", "bfloat16" or "float16"; empty when the file does not say.
  std::string torch_dtype;
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  std::vector<int64_t> eos_token_ids;  // some configs list several

  // `label` names the file in error messages.
  static ModelConfig from_json_text(const std::string& text, const std::string& label);
  static ModelConfig from_file(const std::filesystem::path& config_json);

  // config.json text in the transformers 4.x style (top-level rope_theta and
  // rope_scaling, torch_dtype), which transformers 5 also reads.
  std::string to_json() const;

  // Every parameter tensor's elements, with tied embeddings counted once.
  int64_t num_parameters() const;

  // The longest sequence computed exactly: max_position_embeddings, or the
  // attention window when shorter; and the config.json key that sets it.
  int64_t exact_context() const {
    return attention_window > 0 ? std::min(attention_window, max_position_embeddings)
                                : max_position_embeddings;
  }
  const char* exact_context_key() const {
    return attention_window > 0 && attention_window < max_position_embeddings
               ? "sliding_window"
               : "max_position_embeddings";
  }

  const char* model_type() const { return model_type_name(family); }
  bool is_gpt2() const { return family == ModelFamily::Gpt2; }
  // The dtype the weights were saved in, when the config says.
  std::optional<DType> weights_dtype() const;

  bool operator==(const ModelConfig&) const = default;
};

}  // namespace lt::models
