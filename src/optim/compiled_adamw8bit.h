#pragma once
// The 8-bit AdamW update (optim/adamw8bit_kernel.h's adamw8bit_update_block)
// as one kernel of the fusion compiler (issue 24): one row per block of
// `block_size` elements, one pass that dequantizes m and sqrt(v) from their
// codes, updates as AdamW does (compiled_adamw.h's adamw_step, the same
// operations in the same order), takes each block's new absmax (a row max)
// and requantizes, writing p, the codes, the scales and the bf16 copy of p.
//
// The codes are u8 buffers of the IR. Dequantizing is a lookup in the code
// table (compile/graph.h's Lookup: the table's f32 values, exact).
// Quantizing is quantize_nearest_fast's position (the segment of the value
// and its rounded place in it, the segment's values looked up), then the
// nearer of the two codes around the value by quantize_nearest's rule, in
// the same f32 operations; so everything (p, the codes, near-ties included,
// the scales, the bf16 copy) equals adamw8bit_update_block bit for bit.
#include "compile/graph.h"
#include "compile/kernel_cache.h"
#include "core/tensor.h"
#include "optim/adamw_kernel.h"
#include "optim/compiled_update_kernels.h"

namespace lt::optim {

// Inputs: p, g (full; g f32 or bf16), the codes of m and of sqrt(v) (full,
// u8), their scales (row f32: one block per row), then the nine
// AdamWScalars fields as row values. Outputs: p (f32), the codes of m and
// sqrt(v) (u8), all three written over their inputs (output_over), their
// new scales (row f32), then the bf16 copy of p when `with_bf16_copy`.
compile::KernelGraph adamw8bit_kernel_graph(DType grad_dtype, bool with_bf16_copy);

// Updates one parameter's 8-bit states in place: `param` (f32), `grad`,
// `m_codes` and `sqrt_v_codes` (u8) of n elements, `m_scales` and
// `sqrt_v_scales` (f32) of one value per block of `block_size` (the last
// block may be shorter), all contiguous tensors on the gradient's device
// (the CPU, or CUDA: the kernel as a cubin); writes `bf16_copy` when
// defined (bf16, n elements). The kernel comes from `cache` (one kernel:
// the full blocks and the last one are two calls), its graph built and
// looked up for this call alone (tests; the optimizer uses the overload
// below).
void compiled_adamw8bit_update(compile::KernelCache& cache, const AdamWScalars& s,
                               int64_t block_size, const Tensor& param, const Tensor& grad,
                               const Tensor& m_codes, const Tensor& m_scales,
                               const Tensor& sqrt_v_codes, const Tensor& sqrt_v_scales,
                               const Tensor& bf16_copy = Tensor());
// The same with a resolved kernel (CompiledUpdateKernels::get of
// adamw8bit_kernel_graph) and the scalars as a table on the gradient's
// device (compiled_adamw.h's adamw_scalar_table: [9, R], R at least the
// number of blocks, or 1): the call builds no graph and copies no scalars.
void compiled_adamw8bit_update(const CompiledUpdateKernel& kernel, const Tensor& scalar_table,
                               int64_t block_size, const Tensor& param, const Tensor& grad,
                               const Tensor& m_codes, const Tensor& m_scales,
                               const Tensor& sqrt_v_codes, const Tensor& sqrt_v_scales,
                               const Tensor& bf16_copy = Tensor());

}  // namespace lt::optim
