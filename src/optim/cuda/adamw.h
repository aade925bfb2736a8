#pragma once
// The CUDA AdamW update behind optim/adamw.cpp: per element exactly what
// optim/adamw_kernel.h does on the CPU (same f32 operations in the same
// order, no FMA contraction), so a parameter updated on the GPU matches the
// CPU update bit for bit. Declared without CUDA types so that adamw.cpp
// includes it in every build; defined only when LT_WITH_CUDA.
#include "core/tensor.h"
#include "optim/adamw_kernel.h"

namespace lt::optim::cuda {

// Updates `param`, `exp_avg` and `exp_avg_sq` (f32, contiguous, one CUDA
// device) in place from `grad` (f32 or bf16, contiguous, same device and
// element count), on the calling thread's current stream of that device.
// The caller has checked devices, dtypes and shapes.
void adamw_update(const AdamWScalars& s, const Tensor& param, const Tensor& grad,
                  const Tensor& exp_avg, const Tensor& exp_avg_sq);

}  // namespace lt::optim::cuda
