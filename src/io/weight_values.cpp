#include "io/weight_values.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>

#include "core/thread_pool.h"
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

int64_t count_non_finite(const Tensor& t) {
  const Tensor values = t.to(Device::cpu(), DType::F32).contiguous();
  const float* v = values.data<float>();
  std::atomic<int64_t> total{0};
  parallel_for(0, values.numel(), 1 << 18, [&](int64_t begin, int64_t end) {
    int64_t n = 0;
    for (int64_t i = begin; i < end; ++i) n += std::isfinite(v[i]) ? 0 : 1;
    if (n > 0) total += n;
  });
  return total.load();
}

ParameterLines::ParameterLines(const models::ModelConfig& config) {
  for (const models::HfRule& rule : models::hf_rules(config))
    for (const std::string& internal : rule.internal) hf_name_.emplace(internal, rule.hf_name);
}

std::string ParameterLines::line(const std::string& internal_name, int64_t count,
                                 const std::string& detail) const {
  const auto it = hf_name_.find(internal_name);
  return fmt::format("{} ({} value{}{})", it == hf_name_.end() ? internal_name : it->second, count,
                     count == 1 ? "" : "s", detail);
}

WeightValueReport check_weight_values(const models::CausalLM& model, DType dtype) {
  const ParameterLines lines(model.config());
  WeightValueReport report;
  for (const auto& [name, tensor] : model.parameters()) {
    const Tensor values =
        tensor.to(Device::cpu(), DType::F32).contiguous();  // masters may be on the device
    const int64_t not_finite = count_non_finite(values);
    if (not_finite > 0) report.not_finite.push_back(lines.line(name, not_finite));
    if (dtype == DType::F32) continue;  // f32 holds every f32 value
    const float* v = values.data<float>();
    int64_t beyond = 0;
    float largest = 0;
    for (int64_t i = 0; i < values.numel(); ++i) {
      if (std::isfinite(v[i]) && overflows(v[i], dtype)) {
        ++beyond;
        largest = std::max(largest, std::abs(v[i]));
      }
    }
    if (beyond > 0)
      report.beyond_dtype.push_back(
          lines.line(name, beyond, fmt::format(", the largest {:g}", largest)));
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
