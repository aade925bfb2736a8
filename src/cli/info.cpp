// `lazytrain info`: the version and what this build and machine can do.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <thread>

#include "cli/commands.h"
#include "core/thread_pool.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#endif

namespace lt::cli {

namespace {

nlohmann::json gather_info() {
  nlohmann::json info;
  info["version"] = LT_VERSION;
  info["cpu_threads"] = thread_pool().num_threads();
  info["hardware_threads"] = std::thread::hardware_concurrency();
#ifdef LT_WITH_CUDA
  info["cuda_built"] = true;
  int n = cuda::device_count();
  info["cuda_devices"] = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    info["cuda_devices"].push_back(
        {{"index", i},
         {"name", cuda::device_name(i)},
         {"memory_gib", static_cast<double>(cuda::device_total_memory(i)) / (1 << 30)}});
  }
#else
  info["cuda_built"] = false;
  info["cuda_devices"] = nlohmann::json::array();
#endif
  return info;
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print the version and this build's capabilities");
  auto as_json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *as_json, "Print JSON");
  cmd->callback([as_json] {
    nlohmann::json info = gather_info();
    if (*as_json) {
      fmt::print("{}\n", info.dump(2));
      return;
    }
    fmt::print("lazytrain {}\n", info["version"].get<std::string>());
    fmt::print("  CPU threads for kernels: {} (hardware: {})\n", info["cpu_threads"].get<int>(),
               info["hardware_threads"].get<unsigned>());
    if (!info["cuda_built"].get<bool>()) {
      fmt::print("  CUDA: not built (configure with -DLT_CUDA=ON)\n");
    } else if (info["cuda_devices"].empty()) {
      fmt::print("  CUDA: built; no GPU visible, running on the CPU backend\n");
    } else {
      for (const auto& d : info["cuda_devices"]) {
        fmt::print("  CUDA device {}: {} ({:.1f} GiB)\n", d["index"].get<int>(),
                   d["name"].get<std::string>(), d["memory_gib"].get<double>());
      }
    }
  });
}

}  // namespace lt::cli
