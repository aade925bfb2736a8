#include "optim/compiled_update_kernels.h"

#include "core/error.h"

namespace lt::optim {

CompiledUpdateKernels::CompiledUpdateKernels(std::shared_ptr<compile::KernelCache> cache,
                                             GraphBuilder build)
    : cache_(std::move(cache)), build_(build) {
  LT_CHECK(cache_ != nullptr && build_ != nullptr,
           "CompiledUpdateKernels: needs a kernel cache and a graph builder");
}

const CompiledUpdateKernel& CompiledUpdateKernels::get(DType grad_dtype, bool with_bf16_copy,
                                                       Device device) {
  for (const Entry& e : entries_) {
    if (e.grad_dtype == grad_dtype && e.with_bf16_copy == with_bf16_copy && e.device == device)
      return *e.kernel;
  }
  auto made = std::make_unique<CompiledUpdateKernel>();
  made->graph = build_(grad_dtype, with_bf16_copy);
  ++graphs_built_;
  made->kernel = compile::kernel_for(*cache_, made->graph, device);
  entries_.push_back({grad_dtype, with_bf16_copy, device, std::move(made)});
  return *entries_.back().kernel;
}

}  // namespace lt::optim
