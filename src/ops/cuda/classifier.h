#pragma once
// The CUDA kernel behind ops/classifier.h, declared without CUDA types (see
// ops/cuda/elementwise.h). The caller has checked shapes, dtypes and
// devices.
#include "core/tensor.h"

namespace lt::ops::cuda {

// logits [R, S] dense f32 or bf16 with the vocabulary in its first `vocab`
// columns, targets [R] i32 or i64, row_loss [R] f32. Writes row_loss, and
// when `write_grad` the gradient over the logits (all S columns). A target
// outside [0, vocab) that is not ignore_index is recorded on the device
// (ops/index_checks.h), its row's loss NaN and its gradient without the
// one-hot term; nothing is read back here.
void classifier(const Tensor& logits, int64_t vocab, const Tensor& targets, int64_t ignore_index,
                float grad_scale, const Tensor& row_loss, bool write_grad);

}  // namespace lt::ops::cuda
