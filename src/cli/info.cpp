// `lazytrain info`: the version and what this build and machine can do.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <thread>

#include "cli/commands.h"
#include "compile/compiler_info.h"
#include "core/host_memory.h"
#include "core/thread_pool.h"
#include "ops/cpu/softmax_rows.h"
#include "optim/simd.h"
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
  // The vector builds the CPU kernels chose on this CPU (a slow run on a
  // machine without AVX2 shows here).
  const char* row_isas[] = {"baseline", "avx2", "avx512"};
  info["cpu_kernels"] = {
      {"optimizer", optim::isa_name(optim::active_isa())},
      {"cross_entropy_rows", row_isas[static_cast<int>(ops::cpu::best_row_isa())]}};
  // What exec.schedule auto may plan host memory for (with nothing loaded).
  const int64_t host = host_bytes_for_this_process(0, 0);
  info["host_memory_free_gb"] = host >= 0 ? nlohmann::json(host / 1e9) : nlohmann::json();
  // The fusion compiler (src/compile): asking loads its plugin. Null
  // version and no targets when it does not load, and the reason.
  const compile::CompilerInfo compiler = compile::compiler_info();
  const auto or_null = [](bool known, const std::string& text) {
    return known ? nlohmann::json(text) : nlohmann::json();
  };
  info["compiler"] = {{"built", compiler.built_in},
                      {"loaded", compiler.loaded},
                      {"mlir_version", or_null(compiler.loaded, compiler.mlir_version)},
                      {"targets", compiler.targets},
                      {"plugin", or_null(compiler.built_in, compiler.plugin)},
                      {"error", or_null(!compiler.loaded, compiler.error)}};
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
    fmt::print("  CPU kernels: optimizer {}, cross-entropy rows {}\n",
               info["cpu_kernels"]["optimizer"].get<std::string>(),
               info["cpu_kernels"]["cross_entropy_rows"].get<std::string>());
    if (!info["host_memory_free_gb"].is_null())
      fmt::print("  host memory free: {:.1f} GB\n", info["host_memory_free_gb"].get<double>());
    const nlohmann::json& compiler = info["compiler"];
    if (compiler["loaded"].get<bool>()) {
      std::string targets;
      for (const auto& t : compiler["targets"]) {
        targets += (targets.empty() ? "" : ", ") + t.get<std::string>();
      }
      fmt::print("  fusion compiler: MLIR {} ({}), plugin {}\n",
                 compiler["mlir_version"].get<std::string>(), targets,
                 compiler["plugin"].get<std::string>());
    } else if (compiler["built"].get<bool>()) {
      fmt::print("  fusion compiler: built, but not available here: {}\n",
                 compiler["error"].get<std::string>());
    } else {
      fmt::print("  fusion compiler: not built (libmlir-19-dev and -DLT_MLIR=ON)\n");
    }
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
