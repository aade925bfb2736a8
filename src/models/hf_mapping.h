#pragma once
// The one place per family where Hugging Face tensor names meet internal
// names. Most tensors map one to one; GPT-2's Conv1D layers store weights
// transposed ([in, out]) and fuse q, k and v into one c_attn tensor.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/config.h"
#include "nn/module.h"

namespace lt::models {

enum class HfLayout {
  Same,            // identical shape and layout
  Transposed,      // HF [in, out] (GPT-2 Conv1D) <-> internal [out, in]
  FusedQkvConv1D,  // HF [C, 3C] <-> internal q, k, v weights, each [C, C]
  FusedQkvBias,    // HF [3C] <-> internal q, k, v biases, each [C]
};

struct HfRule {
  std::string hf_name;
  std::vector<std::string> internal;  // one name, or three for the fused layouts
  HfLayout layout = HfLayout::Same;
};

// Every tensor a checkpoint of this config holds, in the order transformers
// lists them. lm_head.weight appears only when embeddings are not tied.
std::vector<HfRule> hf_rules(const ModelConfig& config);

// Arranges tensors given by internal name (parameters, or their gradients)
// in Hugging Face names and layouts, converted to `dtype`, in rule order.
nn::NamedParameters to_hf_layout(const ModelConfig& config,
                                 const std::map<std::string, Tensor>& by_internal_name,
                                 DType dtype);

// One rule's tensor: `get` gives each of rule.internal's tensors (the
// fused layouts read three); and its shape, from the internal shapes.
Tensor hf_tensor(const HfRule& rule, const std::function<Tensor(const std::string&)>& get,
                 DType dtype);
Shape hf_shape(const HfRule& rule, const std::function<Shape(const std::string&)>& shape_of);

// Names some checkpoints carry that are buffers, not parameters (GPT-2's
// causal-mask "attn.bias", older Llama's "rotary_emb.inv_freq").
bool is_ignorable_hf_buffer(const std::string& hf_name);

}  // namespace lt::models
