#pragma once
// The AdamW update as one kernel of the fusion compiler (issue 24): the
// operations of optim/adamw_kernel.h in the same order, written in the
// compiler's IR, so the compiled kernel computes the same IEEE operations
// (the JIT does not contract a multiply and an add into an FMA: MLIR's
// arith ops carry no fastmath flags). One pass reads p, g, m, v and writes
// p, m, v and, when asked, the bf16 copy of p.
//
// The per-step scalars (AdamWScalars) are inputs, not constants, so one
// kernel serves every step and learning rate: the elements form one row of
// n columns and each scalar is a row value.
#include "compile/graph.h"
#include "compile/kernel_cache.h"
#include "core/tensor.h"
#include "optim/adamw_kernel.h"

namespace lt::optim {

// Inputs: p, g, m, v (full; g f32 or bf16, the rest f32), then the nine
// AdamWScalars fields as row values in declaration order. Outputs: p, m, v
// (f32), then the bf16 copy of p when `with_bf16_copy`.
compile::KernelGraph adamw_kernel_graph(DType grad_dtype, bool with_bf16_copy);

// Updates `param`, `exp_avg`, `exp_avg_sq` (f32, contiguous, on the CPU,
// the same number of elements as `grad`) in place, and writes `bf16_copy`
// when defined (bf16, as many elements). The kernel comes from `cache`.
void compiled_adamw_update(compile::KernelCache& cache, const AdamWScalars& s, const Tensor& param,
                           const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                           const Tensor& bf16_copy = Tensor());

}  // namespace lt::optim
