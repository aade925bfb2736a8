#pragma once
// CUDA kernels behind ops/cross_entropy.h, declared without CUDA types
// (see ops/cuda/elementwise.h). The targets are never read on the host:
// the forward counts them and guards them on the device.
#include "ops/cross_entropy.h"

namespace lt::ops::cuda {

// logits [N, V] f32 or bf16, targets [N] i32/i64 on the same device. The
// loss (0-dim f32) and lse ([N] f32) stay on the device; the loss is a
// fixed-order sum, so it is the same from run to run. The count of
// targets and the device's index-error record come back to the host in one
// copy, so this waits for its kernels once; then it throws the first bad
// index recorded on the device (ops/index_checks.h):
// a target outside [0, V) that is not ignore_index, or an id of an
// embedding whose check was deferred.
CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index);

// grad_loss: one element, on the logits' device or on the host. Targets
// are not read back here (the forward checked them); one outside [0, V)
// that is not ignore_index gets no one-hot term instead of a wild write.
// Written into `grad` (dense, logits' shape and dtype), which may be the
// logits themselves.
void cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, int64_t ignore_index, int64_t count,
                            const Tensor& grad);

}  // namespace lt::ops::cuda
