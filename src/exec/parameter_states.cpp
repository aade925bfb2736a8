#include "exec/parameter_states.h"

#include <map>

namespace lt::exec {

std::vector<optim::NamedTensors> states_by_parameter(const std::vector<std::string>& names,
                                                     const optim::NamedTensors& optimizer_state) {
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < names.size(); ++i) index_of[names[i]] = i;
  std::vector<optim::NamedTensors> out(names.size());
  for (const auto& [name, t] : optimizer_state) {
    if (name.size() > 5 && name.ends_with(".step")) continue;
    for (size_t dot = name.rfind('.'); dot != std::string::npos && dot > 0;
         dot = name.rfind('.', dot - 1)) {
      auto it = index_of.find(name.substr(0, dot));
      if (it == index_of.end()) continue;
      out[it->second].emplace_back(name, t);
      break;
    }
  }
  return out;
}

}  // namespace lt::exec
