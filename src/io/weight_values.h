#pragma once
// What writing a model's f32 weights in a narrower dtype would do to its
// values: f16's largest finite value is 65504, so a weight beyond it would
// be written as inf (bf16 reaches f32's range, all but its last ulps).
// `lazytrain convert` refuses the one and warns of NaN or inf already in
// the source, which a user converting a model cannot see otherwise.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "models/causal_lm.h"

namespace lt::io {

struct WeightValueReport {
  // One line per tensor (its Hugging Face name): "model.norm.weight (2
  // values, the largest 1e+05)".
  std::vector<std::string> beyond_dtype;  // finite in f32, inf once written in `dtype`
  std::vector<std::string> not_finite;    // NaN or inf in the weights as read
};

WeightValueReport check_weight_values(const models::CausalLM& model, DType dtype);

// NaN and inf in `t` (any device or dtype), counted in parallel chunks:
// a save of a run whose masters are in memory scans them all (a 7B's are
// 28 GB).
int64_t count_non_finite(const Tensor& t);

// A parameter's name as the model's files name it (its Hugging Face name;
// a fused parameter's is its first part's) with `count` values: "name (N
// values)", a report's line.
class ParameterLines {
 public:
  explicit ParameterLines(const models::ModelConfig& config);
  std::string line(const std::string& internal_name, int64_t count,
                   const std::string& detail = "") const;

 private:
  std::map<std::string, std::string> hf_name_;  // internal -> Hugging Face
};

// A report's lines (`tensors`) for a message: the first four, joined by
// ", ", then ", ..." when there are more.
std::string tensor_list_text(const std::vector<std::string>& tensors);

// For the commands that read a model to use it (eval, generate): a warning
// line naming the tensors with NaN or inf in `model` (tensor_list_text),
// read from `source`, whose losses and tokens they make meaningless; ""
// when there are none.
std::string non_finite_weights_warning(const models::CausalLM& model, const std::string& source);

}  // namespace lt::io
