#pragma once
// The CUDA blockwise 8-bit AdamW update behind optim/adamw8bit.cpp: the same
// codes (adamw8bit_kernel.h's tables, the stored byte a rank in the sorted
// table), the same per-block absmax scales and layout, and per element the
// same f32 operations as the CPU kernel, so a parameter updated on the GPU
// matches the CPU update bit for bit (codes, scales and parameter).
// Declared without CUDA types so adamw8bit.cpp includes it in every build;
// defined only when LT_WITH_CUDA.
#include <cstdint>

#include "core/tensor.h"
#include "optim/adamw_kernel.h"

namespace lt::optim {

// The largest optim.block_size on CUDA: one thread block updates a block,
// each of its 512 threads holding up to eight elements' m and sqrt(v) in
// registers.
constexpr int64_t kMaxCudaBlockSize = 4096;

namespace cuda {

// One fused step for one parameter: dequantize m and sqrt(v) per block of
// `block_size`, update `param` (f32) from `grad` (f32 or bf16), requantize
// with the new block absmax. All tensors contiguous on one CUDA device:
// codes u8 [numel], scales f32 [blocks]. Runs on the calling thread's
// current stream of that device. `shadow`, when defined (bf16, contiguous,
// same device and count), gets bf16(new param) in the same kernel. The
// caller has checked shapes and dtypes.
void adamw8bit_update(const AdamWScalars& s, const Tensor& param, const Tensor& grad,
                      const Tensor& m_codes, const Tensor& m_scales, const Tensor& sqrt_v_codes,
                      const Tensor& sqrt_v_scales, int64_t block_size, const Tensor& shadow = {});

}  // namespace cuda
}  // namespace lt::optim
