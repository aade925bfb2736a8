#pragma once
// Element-wise copies and fills of strided views on one CUDA device: what
// Tensor::copy_, contiguous(), clone(), to(dtype) and fill_ need on a GPU.
// They live in core/ because Tensor does, so every build that has a GPU
// tensor also has them (no registration that a static link could drop).
//
// Declared without CUDA headers so that core/tensor.cpp compiles in every
// build; defined in tensor_copy.cu, which only CUDA builds compile. Callers
// guard with #ifdef LT_WITH_CUDA. Work is enqueued on the device's current
// stream (core/stream.h) and not waited for. Sizes and strides are in
// elements; `dst` and `src` point at the first element of their views.
#include <cstdint>

#include "core/dtype.h"
#include "core/shape.h"

namespace lt::cuda {

// dst[i] = src[i] for every index i of `shape`, converting dtype among f32,
// f64, bf16 and f16 (rounding to nearest even); any dtype copies to itself.
// A source stride may be 0 (broadcast). The views must not overlap.
void strided_copy(int device, const Shape& shape, void* dst, DType dst_dtype,
                  const int64_t* dst_strides, const void* src, DType src_dtype,
                  const int64_t* src_strides);

// Sets every element of the view to the one element of `dtype` at `value`
// (host memory).
void strided_fill(int device, const Shape& shape, void* dst, DType dtype, const int64_t* strides,
                  const void* value);

}  // namespace lt::cuda
