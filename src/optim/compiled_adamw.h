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
#include <vector>

#include "compile/graph.h"
#include "compile/kernel_cache.h"
#include "core/tensor.h"
#include "optim/adamw_kernel.h"

namespace lt::optim {

// AdamWScalars' nine fields as row inputs of a graph, in declaration order.
struct AdamWScalarValues {
  compile::Value grad_scale, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2,
      bias_correction2_sqrt, eps, neg_step_size;
};
AdamWScalarValues adamw_scalar_inputs(compile::KernelGraph& k);
// The tensors for them: each field repeated `rows` times ([rows] f32).
std::vector<Tensor> adamw_scalar_rows(const AdamWScalars& s, int64_t rows);

// One element's update in `k`: detail::moments, then detail::apply,
// operation for operation.
struct AdamWStepValues {
  compile::Value p, m, v, sqrt_v;  // the new values
};
AdamWStepValues adamw_step(compile::KernelGraph& k, const AdamWScalarValues& s, compile::Value p,
                           compile::Value grad, compile::Value m, compile::Value v);

// Inputs: p, g, m, v (full; g f32 or bf16, the rest f32), then the nine
// AdamWScalars fields as row values in declaration order. Outputs: p, m, v
// (f32, written over their inputs: output_over), then the bf16 copy of p
// when `with_bf16_copy`.
compile::KernelGraph adamw_kernel_graph(DType grad_dtype, bool with_bf16_copy);

// Updates `param`, `exp_avg`, `exp_avg_sq` (f32, contiguous, on the
// gradient's device: the CPU, or CUDA, the kernel as a cubin; the same
// number of elements as `grad`) in place, and writes `bf16_copy` when
// defined (bf16, as many elements, on any device). The kernel comes from
// `cache`.
void compiled_adamw_update(compile::KernelCache& cache, const AdamWScalars& s, const Tensor& param,
                           const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                           const Tensor& bf16_copy = Tensor());

}  // namespace lt::optim
