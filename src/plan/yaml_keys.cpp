#include "plan/yaml_keys.h"

#include <yaml-cpp/yaml.h>

#include "core/error.h"

namespace lt::plan {

void apply_yaml_keys(const YAML::Node& mapping, const std::map<std::string, YamlSetter>& setters,
                     const std::string& source, const std::string& prefix) {
  for (const auto& kv : mapping) {
    const std::string key = kv.first.as<std::string>();
    const auto it = setters.find(key);
    if (it == setters.end()) {
      std::string known;
      for (const auto& [name, _] : setters) known += (known.empty() ? "" : ", ") + name;
      fail(source, ": unknown key '", prefix, key, "' (known keys: ", known, ")");
    }
    it->second(kv.second, key);
  }
}

}  // namespace lt::plan
