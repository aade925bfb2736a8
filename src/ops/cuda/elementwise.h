#pragma once
// CUDA kernels behind ops/elementwise.h. Declared without CUDA types so
// that ops/elementwise.cpp includes this in every build; defined only when
// LT_WITH_CUDA. Callers have already checked devices, dtypes and shapes;
// these take f32 or bf16 tensors on one CUDA device, of any strides, and
// return dense results on the current stream.
#include <vector>

#include "core/tensor.h"

namespace lt::ops::cuda {

enum class BinaryKind { Add, Sub, Mul, Div };

// a op b with numpy broadcasting to `shape`; a and b share a dtype.
Tensor binary(BinaryKind kind, const Tensor& a, const Tensor& b, const Shape& shape);
// The same into `out` (dense, the broadcast shape, a's dtype), which may be
// `a` itself: each element is read before it is written, by one thread.
void binary_into(BinaryKind kind, const Tensor& a, const Tensor& b, const Tensor& out);
Tensor scale(const Tensor& a, double s);
Tensor axpby(const Tensor& a, double s, const Tensor& b, double t);
// Sums over the dimensions marked in `reduced` (one flag per dim of a),
// accumulating in f32, into `out_shape` (keepdim or not: the same
// elements). Deterministic: the order of additions depends on the shape only.
Tensor sum(const Tensor& a, const std::vector<bool>& reduced, const Shape& out_shape);

}  // namespace lt::ops::cuda
