#pragma once
// Strided, batched matrix products on the CPU through OpenBLAS: the one
// place that knows how a strided view becomes a BLAS operand. ops/matmul.cpp
// builds matmul, linear and their backward passes on it.
#include "core/tensor.h"

namespace lt::ops::cpu {

// c = a @ b, or c += a @ b when `accumulate`. All three are CPU tensors of
// one compute dtype (f32 or f64); the last two dims are the matrix. Forms:
//   a [..., M, K], b [..., K, N], c [..., M, N]   (same batch dims)
//   a [..., M, K], b [K, N],      c [..., M, N]   (b shared by the batch)
//   a [..., M, K], b [..., K, N], c [M, N]        (products summed over the batch)
// Any strides are accepted. A transposed view reaches BLAS as a transpose
// flag, not a copy; an operand BLAS cannot address (say, a column slice of a
// transposed view) is copied contiguous first. `c` must be addressable as
// it is: a contiguous tensor, a transposed view of one, or a slice of either.
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, bool accumulate);

// The view with the last two dims swapped, even for a tensor that requires
// grad (Tensor::transpose refuses those; callers here run on raw data).
Tensor transpose_last(const Tensor& t);

}  // namespace lt::ops::cpu
