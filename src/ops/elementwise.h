#pragma once
// Elementwise arithmetic with numpy broadcasting, reductions and casts.
// Raw kernels: no autograd (see autograd/functions.h for that).
#include <vector>

#include "core/tensor.h"

namespace lt::ops {

// Both inputs must share a dtype; the result has it and the broadcast shape.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& a, double s);  // a * s
// a * s + b * t elementwise (same shape); the workhorse of backward passes.
Tensor axpby(const Tensor& a, double s, const Tensor& b, double t);
// dst += src in place, with add's rounding (half precision adds in f32 and
// rounds once). Same shape, dtype and device; dst contiguous. It saves the
// sum's allocation: accumulating gradients then needs no third tensor.
void add_(const Tensor& dst, const Tensor& src);

// Sums over `dims` (any order, negative allowed). Accumulates in double.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor sum_all(const Tensor& a);  // 0-dim result
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
// Reduces a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);

Tensor cast(const Tensor& a, DType dtype);

}  // namespace lt::ops
