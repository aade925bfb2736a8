#pragma once
// Embedding lookup: rows of a [V, C] table gathered by integer ids, and the
// scatter-add that is its backward. Raw kernels: no autograd (see
// autograd/functions.h for that).
#include "core/tensor.h"

namespace lt::ops {

// weight [V, C] (any dtype; rows are copied bit for bit), ids i32 or i64 of
// any shape -> [..., C] in weight's dtype. An id outside [0, V) is an
// lt::Error naming the id, where it was found, and V (on a GPU it can be
// deferred to a later point: ops/index_checks.h).
Tensor embedding(const Tensor& weight, const Tensor& ids);

// Scatter-adds grad_out [..., C] (ids.shape() + [C]) into a zero [V, C]
// gradient in grad_out's dtype. Sums accumulate in f32 (f64 for f64) in
// the order the ids appear, so the result does not depend on the thread
// count.
Tensor embedding_backward(const Tensor& grad_out, const Tensor& ids, int64_t vocab_size);

}  // namespace lt::ops
