#pragma once
// Runs a compiled kernel on CPU tensors: the shape classes of the graph
// become tensor shapes. A Full value is a tensor [..., cols] (rows = its
// element count / cols), a Row value [...] (the same leading dims), a Col
// value [cols] (a col_sum output too). Outputs are allocated here,
// contiguous, in the graph's stored dtypes, unless the caller gives them.
//
// A given output may be one of the inputs, the same tensor (written in
// place), when both are Full and of one dtype: both backends read each
// element before writing it (a chunk's logits take their gradient so,
// with no second chunk of memory). On the CPU it costs speed where the
// kernel vectorizes: two pointers to one buffer make LLVM's overlap check
// take the scalar loop (the compiled AdamW so measured 5x slower). A graph
// that says so itself (KernelGraph::output_over) passes one pointer and
// stays vectorized: the optimizer updates are written in place that way.
#include <vector>

#include "compile/graph.h"
#include "compile/jit.h"
#include "core/tensor.h"

namespace lt::compile {

// `inputs` in the order of graph.inputs(); each must be on the CPU,
// contiguous, of its input's dtype and of a shape that agrees with the
// others (errors name the input). `kernel` must be compiled from `graph`.
// `outputs`, when not empty, one per graph output: a defined one is
// written (on the device, contiguous, of its dtype and shape), an
// undefined one allocated. Returns the outputs written.
std::vector<Tensor> call(const CpuKernel& kernel, const KernelGraph& graph,
                         const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& outputs = {});

// What a call of either backend needs: `inputs` checked as above (on
// `device`), the iteration space, the outputs allocated on `device`, and
// every buffer (inputs then outputs) with its element count; `given` as
// call's `outputs`. An output written over an input (KernelGraph::
// output_over) has no buffer of its own: its tensor is that input.
struct PreparedCall {
  int64_t rows = 0, cols = 0;
  std::vector<Tensor> outputs;
  std::vector<void*> buffers;
  std::vector<int64_t> counts;
};
PreparedCall prepare_call(const KernelGraph& graph, const std::vector<Tensor>& inputs,
                          Device device, const std::vector<Tensor>& given = {});

}  // namespace lt::compile
