#pragma once
// Greedy decoding's argmax on the GPU, so that only one id per row crosses
// to the host instead of a row of logits (152k values for Qwen).
// Declared without CUDA types; defined only when LT_WITH_CUDA.
#include "core/tensor.h"

namespace lt::nn::cuda {

// logits [B, V] (f32 or bf16) on a GPU -> [B] i32 on the same GPU: the
// index of each row's largest value, the lowest index among equals (as
// torch.argmax and train::argmax_token).
Tensor argmax_rows(const Tensor& logits);

}  // namespace lt::nn::cuda
