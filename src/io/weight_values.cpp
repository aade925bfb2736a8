#include "io/weight_values.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "models/hf_mapping.h"

namespace lt::io {

namespace {

// Whether `v` (finite) rounds to inf in `dtype`.
bool overflows(float v, DType dtype) {
  if (dtype == DType::F16) return std::isinf(f16_to_f32(f32_to_f16(v)));
  if (dtype == DType::BF16) return std::isinf(bf16_to_f32(f32_to_bf16(v)));
  return false;
}

}  // namespace

WeightValueReport check_weight_values(const models::CausalLM& model, DType dtype) {
  std::map<std::string, std::string> hf_name;  // internal -> Hugging Face
  for (const models::HfRule& rule : models::hf_rules(model.config()))
    for (const std::string& internal : rule.internal) hf_name[internal] = rule.hf_name;
  WeightValueReport report;
  for (const auto& [name, tensor] : model.parameters()) {
    const Tensor values =
        tensor.to(Device::cpu(), DType::F32).contiguous();  // masters may be on the device
    const float* v = values.data<float>();
    int64_t beyond = 0, not_finite = 0;
    float largest = 0;
    for (int64_t i = 0; i < values.numel(); ++i) {
      if (!std::isfinite(v[i])) {
        ++not_finite;
      } else if (overflows(v[i], dtype)) {
        ++beyond;
        largest = std::max(largest, std::abs(v[i]));
      }
    }
    const auto it = hf_name.find(name);
    const std::string shown = it == hf_name.end() ? name : it->second;
    if (beyond > 0)
      report.beyond_dtype.push_back(fmt::format("{} ({} value{}, the largest {:g})", shown, beyond,
                                                beyond == 1 ? "" : "s", largest));
    if (not_finite > 0)
      report.not_finite.push_back(
          fmt::format("{} ({} value{})", shown, not_finite, not_finite == 1 ? "" : "s"));
  }
  return report;
}

std::string tensor_list_text(const std::vector<std::string>& tensors) {
  // An update gone wrong can put NaN in every tensor of a model, hundreds
  // of them; the first few say where, and the run's message stays readable.
  constexpr size_t kShown = 4;
  const size_t shown = std::min(tensors.size(), kShown);
  return fmt::format(
      "{}{}",
      fmt::join(tensors.begin(), tensors.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
      tensors.size() > shown ? ", ..." : "");
}

std::string non_finite_weights_warning(const models::CausalLM& model, const std::string& source) {
  const std::vector<std::string> found = check_weight_values(model, DType::F32).not_finite;
  if (found.empty()) return "";
  return fmt::format(
      "warning: {} holds weights that are NaN or inf, so what the model computes is NaN: {}",
      source, tensor_list_text(found));
}

}  // namespace lt::io
