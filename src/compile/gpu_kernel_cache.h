#pragma once
// GPU kernels by graph key, as compile/kernel_cache.h keeps CPU ones: in
// memory, and with a folder as cubins on disk (<hash>.cubin beside the CPU
// objects' <hash>.kernel), each entry keyed by the graph, the target chip,
// the PTX ISA, the kernel's argument list (kGpuAbi) and, for an elementwise
// kernel of more than one element per thread, that number (and the other
// GpuForms choices that apply to its form). A damaged entry is
// compiled again and rewritten, never loaded.
//
// Compiling needs MLIR (compile/ptx.h) and ptxas (compile/cubin.h); loading
// and launching (compile/gpu_kernel.h) need neither. A build without MLIR,
// such as the GPU machine's, runs the cubins that a build with MLIR wrote
// into the folder, and names the missing entry when one is not there
// (docs/compiler.md, "Kernels for a machine without MLIR").
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compile/gpu_mlir.h"
#include "compile/graph.h"
#include "compile/kernel_cache.h"
#include "compile/ptx.h"

namespace lt::compile {

// The kernel argument list of compile/gpu_mlir.h and the entries' format,
// versioned: a change to either (or to the forms) must change this, so that
// older cubins are not run. 2: entries give the elements per thread. 3: an
// output written over an input (KernelGraph::output_over) has no
// parameter of its own. 4: the lowering changed (FMA contraction, native
// bf16 conversions), so that caches hold no kernels of the slower one.
// 5: the ColSums form (col_sum outputs as [blocks, cols] partials, and a
// second kernel in the module). 6: the sigmoid through PTX's ex2.approx
// and rcp.approx (ScalarWriter), and GELU's graph as x sigmoid(2u)
// (compile/chains.h). 7: the ColSums form as first committed (builds of
// the shared tree under 6 may have cached a draft of it). 8: its kernel
// takes the rows per block from its grid (7's had a constant the launcher
// must match). 9: it loads every slot's inputs of a row before computing.
// 10: its reductions by row groups, a warp a row (gpu_mlir.h). 11: the
// warps' passes load 8 columns a lane at once. 12: RowPerBlock takes rows
// of up to 4096 columns a warp each (the grid changes with it).
// 13: rows a warp each up to 1024 columns (was 4096), warps' passes load 4.
// 14: RowPerBlock a block a row again (its grid as before 12).
// 15: the ColSums kernel held to 3 blocks an SM (nvvm.minctasm).
// 16: a division as a product with rcp.approx (ScalarWriter). 17: with
// the divisor scaled into ftz's range where it lies outside.
inline constexpr const char* kGpuAbi = "gpu-abi 17";

struct GpuBinary {
  std::string cubin;
  GpuLaunchForm form = GpuLaunchForm::Elementwise;
  int threads_per_block = kGpuThreadsPerBlock;
  int elements_per_thread = 1;  // the elementwise form's (PtxTarget)
  // The ColSums form's partials: gpu_col_sum_buffers of the graph (from
  // the graph, not stored in the entry).
  std::vector<size_t> col_sum_buffers;
};

class GpuKernel;  // compile/gpu_kernel.h

// The target KernelCache::gpu() compiles for (the training path: compiled
// blocks and optimizer updates): the elementwise form packed, eight
// consecutive elements a thread loaded and stored as vectors (16 bytes of
// bf16, as the hand-written kernels' packs). Four strided elements a
// thread (session 16 on the H200, bench/RESULTS.md) had already doubled
// SwiGLU over one (0.514 -> 0.237 ms) but still read 2-byte scalars; row
// chains have one form. Col sums without row reductions take two rows an
// iteration (GpuForms::col_sum_rows: GPT-2's bias + GELU backward 0.575 ->
// 0.492 ms on the H200, 2026-12-03). The prebuilt folders must be made
// for this target too (GpuKernelPrebuild.*).
PtxTarget training_gpu_target();

class GpuKernelCache {
 public:
  // folder empty: in memory only. `target`'s chip is the GPU's (sm_90 for
  // the H100 and H200); its PTX ISA the one MLIR writes (ptx_isa_for).
  explicit GpuKernelCache(std::string folder = "", PtxTarget target = {});
  ~GpuKernelCache();

  // The cubin for `graph`: from memory, from the folder, or compiled and
  // written there. Thread-safe. Throws lt::Error naming the entry when it
  // is missing and this build cannot compile it.
  std::shared_ptr<const GpuBinary> binary(const KernelGraph& graph);

  // The kernel loaded on CUDA device `device` (once per device). Throws
  // when the device is not the target's chip, or without CUDA.
  std::shared_ptr<const GpuKernel> get(const KernelGraph& graph, int device);

  KernelCacheStats stats() const;
  const std::string& folder() const { return folder_; }
  const PtxTarget& target() const { return target_; }
  // The key of `graph`'s entry and its file (for tests and messages).
  std::string disk_key(const KernelGraph& graph) const;
  std::filesystem::path entry_path(const KernelGraph& graph) const;

 private:
  std::shared_ptr<const GpuBinary> from_disk_or_compile(const KernelGraph& graph);

  std::string folder_;
  PtxTarget target_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const GpuBinary>> binaries_;
  std::map<std::pair<std::string, int>, std::shared_ptr<const GpuKernel>> loaded_;
  KernelCacheStats stats_;
};

}  // namespace lt::compile
