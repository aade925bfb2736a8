#pragma once
// CUDA kernels behind ops/embedding.h, declared without CUDA types (see
// ops/cuda/elementwise.h). The caller has checked shapes and every id
// (on the host: `rows` is the ids read back, each in [0, V)).
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace lt::ops::cuda {

// weight [V, C] (any dtype, rows copied bit for bit), ids i32/i64 on the
// same device -> [..., C].
Tensor embedding(const Tensor& weight, const Tensor& ids);

// grad_out [..., C] (f32 or bf16) scattered into a zero [V, C] gradient
// of its dtype. `rows` are the ids in flat order, as read on the host.
// Deterministic: each touched vocab row is summed by one block, in f32,
// over its tokens in the order they appear (as the CPU backend does).
Tensor embedding_backward(const Tensor& grad_out, const std::vector<int64_t>& rows,
                          int64_t vocab_size);

}  // namespace lt::ops::cuda
