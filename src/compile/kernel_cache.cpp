#include "compile/kernel_cache.h"

#include <chrono>
#include <cstdlib>
#include <optional>

#include "compile/cache_entry.h"
#include "compile/gpu_kernel_cache.h"
#include "core/error.h"

namespace lt::compile {
namespace {

// The key of an entry on disk: the graph and what its object depends on.
std::string disk_key(const KernelGraph& graph) {
  return graph.key() + " | " + cpu_target_id();
}

}  // namespace

KernelCache::KernelCache(std::string folder) : folder_(std::move(folder)) {}

KernelCache::~KernelCache() = default;

GpuKernelCache& KernelCache::gpu() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!gpu_) gpu_ = std::make_unique<GpuKernelCache>(folder_, training_gpu_target());
  return *gpu_;
}

std::string KernelCache::default_folder() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/lazytrain/kernels";
  const char* home = std::getenv("HOME");
  LT_CHECK(home != nullptr && *home != '\0',
           "compile: neither XDG_CACHE_HOME nor HOME is set, so the kernel cache has no folder");
  return std::string(home) + "/.cache/lazytrain/kernels";
}

std::unique_ptr<CpuKernel> KernelCache::from_disk_or_compile(const KernelGraph& graph) {
  const auto compile_timed = [&](bool keep_object) {
    const auto start = std::chrono::steady_clock::now();
    CompiledObject compiled =
        keep_object ? compile_cpu_object(graph) : CompiledObject{compile_cpu(graph), {}};
    stats_.compile_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++stats_.compiled;
    return compiled;
  };
  if (folder_.empty()) return compile_timed(false).kernel;

  const std::string key = disk_key(graph);
  const std::filesystem::path path = cache_entry_path(folder_, key, ".kernel");
  bool damaged = false;
  if (std::optional<std::string> object = read_cache_entry(path, key, damaged)) {
    try {
      std::unique_ptr<CpuKernel> kernel = load_cpu_object(graph, *object);
      ++stats_.loaded_from_disk;
      return kernel;
    } catch (const Error&) {
      damaged = true;  // a whole entry whose object will not link: rebuild it
    }
  }
  if (damaged) ++stats_.rebuilt;
  CompiledObject compiled = compile_timed(true);
  write_cache_entry(path, key, compiled.object);
  return std::move(compiled.kernel);
}

std::shared_ptr<const CpuKernel> KernelCache::get(const KernelGraph& graph) {
  const std::string key = graph.key();
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = kernels_.find(key); it != kernels_.end()) {
    ++stats_.memory_hits;
    return it->second;
  }
  std::shared_ptr<const CpuKernel> kernel = from_disk_or_compile(graph);
  kernels_.emplace(key, kernel);
  return kernel;
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  KernelCacheStats total = stats_;
  if (gpu_) {  // the GPU half's kernels count alike (its lock is never held while taking ours)
    const KernelCacheStats gpu = gpu_->stats();
    total.compiled += gpu.compiled;
    total.loaded_from_disk += gpu.loaded_from_disk;
    total.rebuilt += gpu.rebuilt;
    total.memory_hits += gpu.memory_hits;
    total.compile_seconds += gpu.compile_seconds;
  }
  return total;
}

}  // namespace lt::compile
