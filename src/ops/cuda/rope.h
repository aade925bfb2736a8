#pragma once
// CUDA kernel behind ops/rope.h, declared without CUDA types (see
// ops/cuda/elementwise.h). The caller has checked shapes and every
// position against the table.
#include "core/tensor.h"

namespace lt::ops::cuda {

// x [B, T, H, D] (f32 or bf16) rotated by sign * angle (sign -1 is the
// backward); cos and sin [P, D/2] on x's device (f64 or f32; others are
// converted to f32); positions undefined, [T] or [B, T] i32/i64.
Tensor rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions,
              double sign);

}  // namespace lt::ops::cuda
