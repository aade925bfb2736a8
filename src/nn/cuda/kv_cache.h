#pragma once
// CUDA kernels behind nn/kv_cache.h, declared without CUDA types; defined
// only when LT_WITH_CUDA. The caller has checked shapes and starts.
#include "core/tensor.h"

namespace lt::nn::cuda {

// cache [B, C, H, D], fresh [B, T, H, D] contiguous, same dtype (f32/bf16);
// starts [B] i64 on the device.
void write_cache(const Tensor& cache, const Tensor& fresh, const Tensor& starts);

// See nn::cached_attention; starts [B] i64 on the device.
Tensor cached_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                        const Tensor& starts, double scale);

}  // namespace lt::nn::cuda
