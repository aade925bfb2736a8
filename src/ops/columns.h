#pragma once
// Column operations on a matrix [R, C] (a Linear weight [out, in] or its
// gradient), for ZenFlow's importance-aware offload (exec/offload.h): column
// j is input feature j. Raw kernels: no autograd.
//
// Column indices are i32 on the matrix's device, each in [0, C). The CPU
// backend checks them; the CUDA kernels trust them (the executor that picks
// them checked them on the host).
#include "core/tensor.h"

namespace lt::ops {

// out[j] = sum over r of |m[r, j]|, accumulated in f32 (m: f32 or bf16)
// -> f32 [C]. The CPU sums rows in ascending order; the GPU in fixed row
// blocks added in order (deterministic, but not the CPU's order).
Tensor column_abs_sums(const Tensor& m);

// m[:, cols] widened to f32 -> [R, k] (m: f32 or bf16; cols [k]).
Tensor gather_columns(const Tensor& m, const Tensor& cols);

// dst[:, cols[j]] = src[:, j], rounded to dst's dtype (to nearest even for
// bf16). src: f32 [R, k]; dst: f32 or bf16 [R, C], contiguous.
void scatter_columns(const Tensor& dst, const Tensor& src, const Tensor& cols);

// dst[:, cols] = 0 (dst: f32 or bf16, contiguous).
void zero_columns(const Tensor& dst, const Tensor& cols);

}  // namespace lt::ops
