#pragma once
// The compiled optimizer updates' kernels (issue 24), each resolved once:
// an optimizer keeps one CompiledUpdateKernels and asks it for the kernel
// of each parameter's (gradient dtype, bf16 copy or not, device). The
// first ask builds the graph (compiled_adamw.h, compiled_adamw8bit.h) and
// looks its kernel up in the cache (compiling it, or loading it from the
// cache's folder); every later one is a scan of a few entries, so a step
// builds no graph, computes no key and takes no cache lock: a call is the
// packing of its arguments and the kernel's run or launch. The per-step
// scalars are inputs of the graphs, so nothing here changes with the step.
#include <cstdint>
#include <memory>
#include <vector>

#include "compile/gpu_kernel.h"
#include "compile/graph.h"
#include "compile/kernel_cache.h"
#include "core/tensor.h"

namespace lt::optim {

// A graph and its kernel for one device.
struct CompiledUpdateKernel {
  compile::KernelGraph graph;
  compile::DeviceKernel kernel;
};

class CompiledUpdateKernels {
 public:
  using GraphBuilder = compile::KernelGraph (*)(DType grad_dtype, bool with_bf16_copy);
  CompiledUpdateKernels(std::shared_ptr<compile::KernelCache> cache, GraphBuilder build);

  // The kernel for `build(grad_dtype, with_bf16_copy)` on `device`. Throws
  // as compile::kernel_for does (cannot compile, kernel not cached). Not
  // thread-safe: resolve before a parallel section; the reference stays
  // valid as long as this object.
  const CompiledUpdateKernel& get(DType grad_dtype, bool with_bf16_copy, Device device);

  // Graphs built so far: one per distinct get, never per step.
  int64_t graphs_built() const { return graphs_built_; }
  compile::KernelCache& cache() const { return *cache_; }

 private:
  struct Entry {
    DType grad_dtype;
    bool with_bf16_copy;
    Device device;
    std::unique_ptr<const CompiledUpdateKernel> kernel;
  };
  std::shared_ptr<compile::KernelCache> cache_;
  GraphBuilder build_;
  std::vector<Entry> entries_;
  int64_t graphs_built_ = 0;
};

}  // namespace lt::optim
