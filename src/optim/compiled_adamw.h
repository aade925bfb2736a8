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
#include "optim/compiled_update_kernels.h"

namespace lt::optim {

// AdamWScalars' nine fields as row inputs of a graph, in declaration order.
constexpr int64_t kAdamWScalarCount = 9;
struct AdamWScalarValues {
  compile::Value grad_scale, decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2,
      bias_correction2_sqrt, eps, neg_step_size;
};
AdamWScalarValues adamw_scalar_inputs(compile::KernelGraph& k);
// Writes the nine fields, each repeated `rows` times, field after field
// (9 * rows floats) at `out`.
void write_adamw_scalars(const AdamWScalars& s, int64_t rows, float* out);
// The same as a [9, rows] f32 tensor on the CPU: one copy moves a call's
// scalars to a device (not nine).
Tensor adamw_scalar_table(const AdamWScalars& s, int64_t rows);
// Many updates' tables at once: update j's [9, rows[j]] table on
// devices[j], all written into one host buffer and moved with one copy per
// device (each copy to a GPU waits for its stream: one per step, not one
// per update).
std::vector<Tensor> adamw_scalar_tables(const std::vector<AdamWScalars>& s,
                                        const std::vector<int64_t>& rows,
                                        const std::vector<Device>& devices);
// The graph's nine row inputs for a call of `rows` rows, appended to
// `inputs`: the first `rows` of each field of `table` ([9, R], R >= rows,
// contiguous, on the call's device), views, no copies.
void append_scalar_rows(const Tensor& table, int64_t rows, std::vector<Tensor>& inputs);

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
// `cache`: its graph is built and looked up for this call alone (tests,
// one-off updates; the optimizer resolves it once, the overload below).
void compiled_adamw_update(compile::KernelCache& cache, const AdamWScalars& s, const Tensor& param,
                           const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                           const Tensor& bf16_copy = Tensor());
// The same with a resolved kernel (CompiledUpdateKernels::get of
// adamw_kernel_graph, for the gradient's dtype, the copy and the device)
// and the scalars as a [9, 1] table on the gradient's device (rows of
// adamw_scalar_table): the call builds no graph and copies no scalars.
void compiled_adamw_update(const CompiledUpdateKernel& kernel, const Tensor& scalar_table,
                           const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                           const Tensor& exp_avg_sq, const Tensor& bf16_copy = Tensor());
// The same on pointers, as the optimizer calls it (no tensors made a
// call): `n` elements of p, m, v (f32), the gradient (`grad_dtype`) and
// the bf16 copy (or null), contiguous on the kernel's device; the nine
// scalars at `scalars`, `scalar_stride` floats apart, on that device.
// Checks the kernel's graph against the dtype and the copy; the buffers
// are the caller's to answer for.
void compiled_adamw_run(const CompiledUpdateKernel& kernel, const float* scalars,
                        int64_t scalar_stride, int64_t n, float* param, const void* grad,
                        DType grad_dtype, float* exp_avg, float* exp_avg_sq, void* bf16_copy);

}  // namespace lt::optim
