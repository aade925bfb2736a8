#pragma once
// Softmax cross-entropy over a vocabulary, mean over the counted targets.
// Raw kernels: no autograd (see autograd/functions.h for that).
//
// Memory: the forward keeps one logsumexp per row, never a softmax; the
// backward recomputes each row's softmax into the gradient it writes.
// Half-precision logits are widened to f32 one row at a time.
#include <cstdint>

#include "core/tensor.h"

namespace lt::ops {

struct CrossEntropyOutput {
  // 0-dim, f32 (f64 for f64 logits) even for half-precision logits: the
  // loss is a mean over many tokens and is logged, so it keeps f32.
  Tensor loss;
  Tensor lse;         // [N] logsumexp per row, compute dtype; 0 for ignored rows
  int64_t count = 0;  // targets that count (!= ignore_index)
};

// logits [N, V] (any floating dtype, computed in f32, f64 for f64),
// targets [N] i32 or i64. loss = mean over rows with target != ignore_index
// of lse - logits[target]; 0 when no row counts. A target outside [0, V)
// that is not ignore_index is an lt::Error naming it. On a GPU the count
// comes back to the host (a wait), and with it any bad index recorded on
// the device by an embedding whose check was deferred (ops/index_checks.h).
CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets,
                                 int64_t ignore_index = -100);

// d loss / d logits = (softmax - onehot(target)) * grad_loss / count for
// counted rows, 0 for ignored rows (all 0 when count is 0). grad_loss: one
// element. Result: logits' shape and dtype.
Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets,
                              const Tensor& lse, int64_t ignore_index, int64_t count);
// The same gradient written over `logits` (contiguous) instead of into a
// new tensor: the caller's logits are gone, and a vocabulary-wide chunk
// needs its memory once, not twice.
void cross_entropy_backward_(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets,
                             const Tensor& lse, int64_t ignore_index, int64_t count);

}  // namespace lt::ops
