// `lazytrain profile`: measure this machine and write a hardware profile
// for `lazytrain plan`.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "io/atomic_file.h"
#include "plan/profile.h"

namespace lt::cli {

void add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Measure this machine into a hardware profile (YAML)");
  auto out = std::make_shared<std::string>("hw.yaml");
  auto options = std::make_shared<plan::ProfileOptions>();
  auto disk_mb = std::make_shared<int64_t>(512);
  cmd->add_option("--out", *out, "where to write the profile")->capture_default_str();
  cmd->add_option("--disk-path", options->disk_path, "folder for the disk test and offload")
      ->capture_default_str();
  cmd->add_option("--disk-mb", *disk_mb, "MiB written and read back")->capture_default_str();
  cmd->add_option("--repeats", options->repeats, "runs per figure (median)")->capture_default_str();
  cmd->callback([out, options, disk_mb] {
    options->disk_bytes = *disk_mb << 20;
    const plan::ProfileReport r = plan::measure_profile(*options);
    io::write_file_atomic(*out, r.profile.to_yaml());
    fmt::print("{}", r.profile.to_yaml());
    std::string measured;
    for (const auto& k : r.measured) measured += (measured.empty() ? "" : ", ") + k;
    fmt::print("measured: {}\n", measured);
    for (const auto& n : r.notes) fmt::print("note: {}\n", n);
    fmt::print("written to {}\n", *out);
  });
}

}  // namespace lt::cli
