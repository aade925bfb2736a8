#pragma once
// Shared by every op: which type a kernel computes in, and the device
// checks. CPU kernels compute in f64 for f64 tensors and in f32 for every
// other floating type; bf16/f16 inputs are widened first and results are
// rounded back to the input type.
#include "core/tensor.h"

namespace lt::ops {

DType compute_dtype(DType t);
// A contiguous copy (or self) of `t` in its compute dtype.
Tensor as_compute(const Tensor& t);
// Refuses tensors that are not floating point.
void check_floating(const Tensor& t, const char* op);
// All tensors on one device; returns it.
Device common_device(std::initializer_list<const Tensor*> tensors, const char* op);
[[noreturn]] void no_kernel(const char* op, Device device);

// Calls fn(T{}) with T = float or double for the compute dtype `t`.
template <typename Fn>
decltype(auto) dispatch_floating(DType t, Fn&& fn) {
  if (t == DType::F64) return fn(double{});
  LT_CHECK(t == DType::F32, "kernel compute type must be f32 or f64, got ", dtype_name(t));
  return fn(float{});
}

}  // namespace lt::ops
