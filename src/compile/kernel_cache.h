#pragma once
// Compiled kernels by graph key (the expression, its dtypes and shape
// classes: KernelGraph::key), so that a process compiles each kernel once
// and, with a folder, a machine compiles it once: the object code is kept
// in <folder>/<hash>.kernel with the key it was built from and a checksum.
// An entry that does not read back whole (another key, a wrong size or
// checksum, an object that will not link) is compiled again and
// rewritten, never run.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "compile/graph.h"
#include "compile/jit.h"

namespace lt::compile {

struct KernelCacheStats {
  int64_t compiled = 0;          // kernels compiled by this cache
  int64_t loaded_from_disk = 0;  // kernels linked from the folder
  int64_t rebuilt = 0;           // disk entries found damaged and replaced
  int64_t memory_hits = 0;       // lookups answered by an earlier kernel
  double compile_seconds = 0.0;  // spent compiling (not loading)
};

class GpuKernelCache;  // compile/gpu_kernel_cache.h

class KernelCache {
 public:
  // folder empty: in memory only. The folder is made when first written.
  explicit KernelCache(std::string folder = "");
  ~KernelCache();

  // The kernel for `graph`, compiled or loaded on first use. Thread-safe;
  // a compile holds the cache's lock (compiles are rare).
  std::shared_ptr<const CpuKernel> get(const KernelGraph& graph);

  // This cache's kernels and its GPU half's (gpu()), together.
  KernelCacheStats stats() const;
  const std::string& folder() const { return folder_; }

  // The GPU kernels (cubins, for sm_90) kept in the same folder, made on
  // first use, for callers that run on either device.
  GpuKernelCache& gpu();

  // $XDG_CACHE_HOME/lazytrain/kernels, else ~/.cache/lazytrain/kernels.
  static std::string default_folder();

 private:
  std::unique_ptr<CpuKernel> from_disk_or_compile(const KernelGraph& graph);

  std::string folder_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const CpuKernel>> kernels_;
  KernelCacheStats stats_;
  std::unique_ptr<GpuKernelCache> gpu_;
};

}  // namespace lt::compile
