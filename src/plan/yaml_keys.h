#pragma once
// The strict key: value reading the hardware profile and its stage_times
// share: each key of a YAML mapping goes to its setter, and a key without
// one is refused, naming the file, the key and the keys that are known.
#include <functional>
#include <map>
#include <string>

namespace YAML {
class Node;
}

namespace lt::plan {

using YamlSetter = std::function<void(const YAML::Node& value, const std::string& key)>;

// `prefix` goes before the key in the error ("stage_times." for nested keys).
void apply_yaml_keys(const YAML::Node& mapping, const std::map<std::string, YamlSetter>& setters,
                     const std::string& source, const std::string& prefix = "");

}  // namespace lt::plan
