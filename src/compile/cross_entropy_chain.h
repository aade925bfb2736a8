#pragma once
// The softmax cross-entropy around the lm_head GEMM (issue 24) as compiled
// chains, one kernel each over the [N, V] logits: the forward's logsumexp
// and loss per row (ops::cross_entropy) and the backward's softmax minus
// the one-hot target, scaled (ops::cross_entropy_backward). The target is a
// row value (its class as a float, exact below 2^24 classes) compared with
// a column index, so neither the target's logit nor the one-hot needs a
// gather. Arithmetic is f32 (the row sums too, where ops' CPU kernel sums
// exp in double), so the results agree with ops' to f32 rounding.
#include <cstdint>

#include "compile/graph.h"
#include "compile/kernel_cache.h"
#include "core/tensor.h"
#include "ops/cross_entropy.h"

namespace lt::compile {

// inputs: logits (Full, `dtype`), target (Row f32: the class, or -1 for a
// row that does not count), column (Col f32: 0, 1, ..., V - 1); outputs:
//   lse  = max + log(sum(exp(logits - max)))  (Row f32; 0 where ignored)
//   loss = lse - logits[target]               (Row f32; 0 where ignored)
KernelGraph cross_entropy_forward_graph(DType dtype);

// inputs: logits (Full, `dtype`), lse, target, scale (Row f32; scale: the
// loss gradient over the count for a counted row, 0 for an ignored one),
// column (Col f32); output: (exp(logits - lse) - onehot(target)) * scale
// (Full, `dtype`).
KernelGraph cross_entropy_backward_graph(DType dtype);

// ops::cross_entropy through the compiled forward, on the logits' device
// (the CPU, or CUDA: a cubin): the same loss (0-dim f32, the mean over
// counted rows, summed in double on the host), lse ([N] f32) and count.
// The targets are read on the host (checked as ops checks them).
ops::CrossEntropyOutput compiled_cross_entropy(KernelCache& cache, const Tensor& logits,
                                               const Tensor& targets, int64_t ignore_index = -100);

// ops::cross_entropy_backward through the compiled backward: d loss /
// d logits for a loss gradient `grad_loss`, logits' shape and dtype.
Tensor compiled_cross_entropy_backward(KernelCache& cache, double grad_loss, const Tensor& logits,
                                       const Tensor& targets, const Tensor& lse,
                                       int64_t ignore_index, int64_t count);

// The same written over `logits` (contiguous), as ops::cross_entropy_backward_
// does: a chunk of logits needs its memory once (exec/memory_budget.cpp
// counts lm_head_loss's head step so).
void compiled_cross_entropy_backward_(KernelCache& cache, double grad_loss, const Tensor& logits,
                                      const Tensor& targets, const Tensor& lse,
                                      int64_t ignore_index, int64_t count);

}  // namespace lt::compile
