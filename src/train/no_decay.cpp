#include "train/no_decay.h"

#include <algorithm>

#include "models/hf_mapping.h"

namespace lt::train {

NoDecay resolve_no_decay(const models::ModelConfig& model,
                         const std::vector<std::string>& patterns) {
  NoDecay out;
  out.substrings = patterns;
  const std::vector<models::HfRule> rules = models::hf_rules(model);
  const auto holds = [](const std::string& name, const std::string& pattern) {
    return name.find(pattern) != std::string::npos;
  };
  for (const std::string& pattern : patterns) {
    bool matched = false;
    for (const models::HfRule& rule : rules) {
      const bool by_internal = std::any_of(rule.internal.begin(), rule.internal.end(),
                                           [&](const auto& n) { return holds(n, pattern); });
      matched = matched || by_internal;
      if (by_internal || !holds(rule.hf_name, pattern)) continue;
      matched = true;
      for (const std::string& internal : rule.internal)
        if (std::find(out.substrings.begin(), out.substrings.end(), internal) ==
            out.substrings.end())
          out.substrings.push_back(internal);
    }
    if (!matched) out.unmatched.push_back(pattern);
  }
  return out;
}

}  // namespace lt::train
