#include "plan/hardware.h"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/shell_syntax.h"
#include "data/json_fields.h"
#include "plan/yaml_keys.h"

namespace lt::plan {

namespace {

double read_number(const YAML::Node& n, const std::string& key, const std::string& source) {
  const std::string line =
      n.Mark().line >= 0 ? " (line " + std::to_string(n.Mark().line + 1) + ")" : "";
  LT_CHECK(n.IsScalar(), source, ": key '", key, "'", line, ": expected a number");
  double v = 0;
  try {
    v = n.as<double>();
  } catch (const YAML::Exception&) {
    fail(source, ": key '", key, "'", line, ": expected a number, got '", n.Scalar(), "'");
  }
  LT_CHECK(v > 0 && v < 1e12, source, ": key '", key, "'", line,
           ": must be a positive number, got ", n.Scalar());
  return v;
}

}  // namespace

HardwareProfile HardwareProfile::from_yaml_text(const std::string& text,
                                                const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(source, ": not valid YAML (", e.msg, ", line ", e.mark.line + 1, ")");
  }
  HardwareProfile p;
  if (root.IsNull()) return p;
  LT_CHECK(root.IsMap(), source, ": a hardware profile must be a YAML mapping of key: value");
  using Setter = YamlSetter;
  auto number = [&](double& field) -> Setter {
    return [&field, &source](const YAML::Node& n, const std::string& key) {
      field = read_number(n, key, source);
    };
  };
  auto optional_number = [&](std::optional<double>& field) -> Setter {
    return [&field, &source](const YAML::Node& n, const std::string& key) {
      field = read_number(n, key, source);
    };
  };
  const std::map<std::string, Setter> setters = {
      {"gpu_memory_gb", number(p.gpu_memory_gb)},
      {"host_memory_gb", number(p.host_memory_gb)},
      {"disk_gb", number(p.disk_gb)},
      {"disk_path",
       [&](const YAML::Node& n, const std::string& key) {
         LT_CHECK(n.IsScalar() && !n.Scalar().empty(), source, ": key '", key,
                  "': expected a path");
         const std::string shell =
             shell_syntax_message(n.Scalar(), "a hardware profile is not expanded by a shell");
         LT_CHECK(shell.empty(), source, ": key '", key, "' (line ", n.Mark().line + 1,
                  "): ", shell);
         p.disk_path = n.Scalar();
       }},
      {"h2d_gbps", number(p.h2d_gbps)},
      {"d2h_gbps", number(p.d2h_gbps)},
      {"bidir_gbps", number(p.bidir_gbps)},
      {"disk_read_gbps", number(p.disk_read_gbps)},
      {"disk_write_gbps", number(p.disk_write_gbps)},
      {"host_mem_gbps", number(p.host_mem_gbps)},
      {"gpu_tflops", number(p.gpu_tflops)},
      {"cpu_adam_gparams_per_s", number(p.cpu_adam_gparams_per_s)},
      {"cpu_adam8bit_gparams_per_s", number(p.cpu_adam8bit_gparams_per_s)},
      {"gpu_adam_gparams_per_s", number(p.gpu_adam_gparams_per_s)},
      {"gpu_adam8bit_gparams_per_s", number(p.gpu_adam8bit_gparams_per_s)},
      {"cpu_adam_beside_copies_gparams_per_s",
       optional_number(p.cpu_adam_beside_copies_gparams_per_s)},
      {"cpu_adam8bit_beside_copies_gparams_per_s",
       optional_number(p.cpu_adam8bit_beside_copies_gparams_per_s)},
      {"cpu_adam_in_run_scale", optional_number(p.cpu_adam_in_run_scale)},
      {"cpu_adam8bit_in_run_scale", optional_number(p.cpu_adam8bit_in_run_scale)},
      {"gpu_activation_gb", optional_number(p.gpu_activation_gb)},
      {"host_activation_gb", optional_number(p.host_activation_gb)},
      {"link_gbps", optional_number(p.link_gbps)},
      {"node_link_gbps", optional_number(p.node_link_gbps)},
      {"stage_times",
       [&](const YAML::Node& n, const std::string&) {
         p.stage_times = StageTimes::from_yaml(n, source);
       }},
  };
  apply_yaml_keys(root, setters, source);
  return p;
}

HardwareProfile HardwareProfile::from_file(const std::string& path) {
  return from_yaml_text(data::read_whole_file(path), path);
}

std::string HardwareProfile::to_yaml() const {
  std::ostringstream os;
  os << "# lazytrain hardware profile: sizes in GB (1e9 bytes), bandwidths in GB/s\n";
  auto kv = [&](const char* key, double v) { os << key << ": " << v << "\n"; };
  kv("gpu_memory_gb", gpu_memory_gb);
  kv("host_memory_gb", host_memory_gb);
  kv("disk_gb", disk_gb);
  os << "disk_path: \"" << disk_path << "\"\n";
  kv("h2d_gbps", h2d_gbps);
  kv("d2h_gbps", d2h_gbps);
  kv("bidir_gbps", bidir_gbps);
  kv("disk_read_gbps", disk_read_gbps);
  kv("disk_write_gbps", disk_write_gbps);
  kv("host_mem_gbps", host_mem_gbps);
  kv("gpu_tflops", gpu_tflops);
  kv("cpu_adam_gparams_per_s", cpu_adam_gparams_per_s);
  kv("cpu_adam8bit_gparams_per_s", cpu_adam8bit_gparams_per_s);
  kv("gpu_adam_gparams_per_s", gpu_adam_gparams_per_s);
  kv("gpu_adam8bit_gparams_per_s", gpu_adam8bit_gparams_per_s);
  if (cpu_adam_beside_copies_gparams_per_s)
    kv("cpu_adam_beside_copies_gparams_per_s", *cpu_adam_beside_copies_gparams_per_s);
  if (cpu_adam8bit_beside_copies_gparams_per_s)
    kv("cpu_adam8bit_beside_copies_gparams_per_s", *cpu_adam8bit_beside_copies_gparams_per_s);
  if (cpu_adam_in_run_scale) kv("cpu_adam_in_run_scale", *cpu_adam_in_run_scale);
  if (cpu_adam8bit_in_run_scale) kv("cpu_adam8bit_in_run_scale", *cpu_adam8bit_in_run_scale);
  if (gpu_activation_gb) kv("gpu_activation_gb", *gpu_activation_gb);
  if (host_activation_gb) kv("host_activation_gb", *host_activation_gb);
  if (link_gbps) kv("link_gbps", *link_gbps);
  if (node_link_gbps) kv("node_link_gbps", *node_link_gbps);
  if (stage_times) os << stage_times->to_yaml();
  return os.str();
}

}  // namespace lt::plan
