#include "train/weight_check.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <map>
#include <set>

#include "core/thread_pool.h"
#include "models/hf_mapping.h"

namespace lt::train {
namespace {

// In parallel chunks: every save of a run whose masters are in memory
// scans them all (a 7B's are 28 GB).
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

}  // namespace

std::vector<std::string> non_finite_parameters(const models::CausalLM& model,
                                               exec::StagedStates* staged) {
  std::map<std::string, std::string> hf_name;  // internal -> Hugging Face, as files name them
  for (const models::HfRule& rule : models::hf_rules(model.config()))
    for (const std::string& internal : rule.internal) hf_name[internal] = rule.hf_name;
  std::vector<std::string> found;
  const auto check = [&](const std::string& name, const Tensor& t) {
    const int64_t n = count_non_finite(t);
    if (n == 0) return;
    const auto it = hf_name.find(name);
    found.push_back(fmt::format("{} ({} value{})", it == hf_name.end() ? name : it->second, n,
                                n == 1 ? "" : "s"));
  };
  std::set<std::string> read_from_disk;
  if (staged != nullptr) {
    std::set<std::string> parameters;
    for (const auto& [name, t] : model.parameters()) parameters.insert(name);
    const std::vector<bool> on_disk = staged->on_disk();
    for (size_t stage = 0; stage < on_disk.size(); ++stage) {
      if (!on_disk[stage]) continue;
      for (const auto& [name, t] : staged->read(stage)) {
        if (parameters.count(name) == 0) continue;  // an optimizer state
        check(name, t);
        read_from_disk.insert(name);
      }
    }
  }
  for (const auto& [name, t] : model.parameters())
    if (read_from_disk.count(name) == 0 && t.impl()->storage) check(name, t);
  return found;
}

}  // namespace lt::train
