#include "train/weight_check.h"

#include <set>

#include "io/weight_values.h"

namespace lt::train {

std::vector<std::string> non_finite_parameters(const models::CausalLM& model,
                                               exec::StagedStates* staged) {
  const io::ParameterLines lines(model.config());
  std::vector<std::string> found;
  const auto check = [&](const std::string& name, const Tensor& t) {
    if (const int64_t n = io::count_non_finite(t); n > 0) found.push_back(lines.line(name, n));
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
