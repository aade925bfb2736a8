#pragma once
// The fused classifier: the language-model head's softmax cross-entropy,
// its gradient and the head's backward products computed in the forward,
// as llm.c's fused classifier does. Raw kernels: no autograd
// (autograd/fn_lm_loss.cpp records lm_head_loss_grads).
//
// Why: the unfused head writes each chunk's logits, reads them for the
// loss, and in backward computes them a second time (one more GEMM) before
// reading and writing them again for the gradient. Here a chunk's logits
// are computed once and read twice: once for the row's logsumexp and once
// to write the gradient over them, which the two backward GEMMs then read.
// The vocabulary is padded (GPT-2's 50257 columns to 50304) so that every
// GEMM's leading dimension is aligned: an odd one forces cuBLASLt off its
// fast kernels (the unfused GPT-2 head ran at ~14% of the GEMM rate).
#include <cstdint>

#include "core/tensor.h"

namespace lt::ops {

// logits [R, S] (f32, f64, bf16; contiguous) whose first `vocab` columns
// are the vocabulary and the rest padding; targets [R] i32 or i64;
// row_loss [R] f32 (f64 for f64 logits), written: lse - logits[target],
// 0 for rows whose target is ignore_index. When `write_grad`, the logits
// are overwritten by (softmax - onehot(target)) * grad_scale in their first
// `vocab` columns and 0 in the padding and in ignored rows. On the CPU a
// bad target (outside [0, vocab), not ignore_index) is an lt::Error before
// any work; on a GPU it is recorded on the device (ops/index_checks.h) and
// its row's loss is NaN.
void classifier_(const Tensor& logits, int64_t vocab, const Tensor& targets, int64_t ignore_index,
                 double grad_scale, const Tensor& row_loss, bool write_grad);

struct LmHeadLossGrads {
  Tensor loss;    // 0-dim f32 (f64 for f64 inputs) on the inputs' device
  Tensor hidden;  // d loss / d hidden, hidden's shape and dtype
  Tensor weight;  // d loss / d weight, weight's shape and dtype
};

// loss = sum over rows r with targets[r] != ignore_index of
// (logsumexp(hidden[r] @ weight^T) - (hidden[r] @ weight^T)[targets[r]]),
// divided by loss_denominator, and its gradients, for hidden [N, C],
// weight [V, C], targets [N]. Rows go in chunks of about `chunk_logits`
// logits; the padded vocabulary is V rounded up to `pad_to`. Nothing is
// read back to the host (the loss stays on the device): a bad target is
// thrown by the caller's check_index_errors when index checks are
// deferred, else here after one wait. The CPU computes f32 and f64 only.
// Whether training on a GPU runs lm_head_loss_grads (the fused head) for
// the head's loss: the default; LT_LM_HEAD=unfused keeps the chunked head
// that recomputes the logits in backward. Read per call, so that a test
// can switch it.
bool fused_lm_head_enabled();
// The fused head pads the vocabulary to a multiple of this (GPT-2's 50257
// columns become 50304, as llm.c pads them), and then holds a padded copy
// of the weight beside its padded gradient (exec/memory_budget.cpp).
constexpr int64_t kLmHeadPadVocabTo = 128;

LmHeadLossGrads lm_head_loss_grads(const Tensor& hidden, const Tensor& weight,
                                   const Tensor& targets, double loss_denominator,
                                   int64_t ignore_index, int64_t chunk_logits, int64_t pad_to);

}  // namespace lt::ops
