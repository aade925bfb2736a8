#pragma once
// CUDA kernels behind ops/embedding.h, declared without CUDA types (see
// ops/cuda/elementwise.h). The caller has checked shapes and dtypes; the
// ids are not read on the host. A bad id (outside [0, V)) is recorded on
// the device (ops/cuda/index_check.cuh) for the caller to throw (see
// ops/index_checks.h); its output row is zero and its gradient is dropped.
#include <cstdint>

#include "core/tensor.h"

namespace lt::ops::cuda {

// weight [V, C] (any dtype, rows copied bit for bit), ids i32/i64 on the
// same device -> [..., C].
Tensor embedding(const Tensor& weight, const Tensor& ids);

// grad_out [..., C] (f32 or bf16) scattered into a zero [V, C] gradient
// of its dtype; ids i32/i64 [...] on the same device. Deterministic: the
// token positions are grouped by id with a stable device sort, and each
// touched vocab row is summed by one block, in f32, over its tokens in the
// order they appear (as the CPU backend does).
Tensor embedding_backward(const Tensor& grad_out, const Tensor& ids, int64_t vocab_size);

}  // namespace lt::ops::cuda
