#pragma once
// The unfused sequence a fused chain replaces, for issue 24's "over
// unfused" column (tests/gpu/compiled_kernels_gpu_bench.cpp): one kernel
// per op of the chain's graph, each reading its operands from memory and
// writing its value there, as an eager framework runs the same expression
// on tensors of the chain's dtype (`0.5 * x * (1 + tanh(...))` is eight
// kernels in PyTorch eager). Full values are stored in the chain's dtype,
// row reductions in f32. Values of one per row, one per column or scalar
// that are not reductions (a mean's division by cols, an rsqrt of a row)
// are recomputed inside each kernel that reads them instead of being
// kernels of their own: they move no bytes worth counting, so leaving them
// out only flatters the unfused sequence.
#include <cstdint>
#include <optional>
#include <vector>

#include "compile/gpu_kernel.h"
#include "compile/graph.h"
#include "core/tensor.h"

namespace lt::compile::testing {

// Values are named by the fused graph's node ids; a chain output that
// stores a value another output stores already, in another dtype (AdamW's
// bf16 copy of p), is one more kernel, a cast, named past the graph's nodes.
struct UnfusedKernel {
  KernelGraph graph;             // one output: the value named `node`
  int32_t node = -1;             // see above
  std::vector<int32_t> sources;  // per input of `graph`: the value it reads
};
struct UnfusedSequence {
  std::vector<UnfusedKernel> kernels;
  std::vector<int32_t> outputs;  // per fused graph output: the value that is it
};

// In the fused graph's node order, for the values the outputs depend on.
// Each fused graph input is read as it is stored; the fused graph's outputs
// are among the kernels' values, as the chain stores them. The other full
// values are stored in `values`, by default the chain's dtype: that of its
// first full input (bf16 activations; an optimizer update's f32 parameters).
UnfusedSequence one_kernel_per_op(const KernelGraph& fused,
                                  std::optional<DType> values = std::nullopt);

// Runs `kernel` (compiled from k.graph) over [rows, cols] on `args` (one per
// k.sources, on the kernel's device) into a new tensor there. Not through
// compile::call: a kernel that reads only per-row values (a norm's saved
// rsqrt from its stored mean square) cannot tell cols from its inputs, and
// its mean divides by cols.
Tensor run_unfused_kernel(const DeviceKernel& kernel, const UnfusedKernel& k,
                          const std::vector<Tensor>& args, int64_t rows, int64_t cols);

}  // namespace lt::compile::testing
