#pragma once
// CUDA kernels behind ops/columns.h, declared without CUDA types (see
// ops/cuda/elementwise.h). The caller has checked shapes, dtypes and
// devices; column indices are trusted. All run on the current stream.
#include "core/tensor.h"

namespace lt::ops::cuda {

Tensor column_abs_sums(const Tensor& m);
Tensor gather_columns(const Tensor& m, const Tensor& cols);
void scatter_columns(const Tensor& dst, const Tensor& src, const Tensor& cols);
void zero_columns(const Tensor& dst, const Tensor& cols);

}  // namespace lt::ops::cuda
