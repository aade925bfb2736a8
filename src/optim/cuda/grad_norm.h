#pragma once
// The CUDA sum of squared gradients behind optim/clip.cpp. Declared without
// CUDA types; defined only when LT_WITH_CUDA.
#include <vector>

#include "core/tensor.h"

namespace lt::optim::cuda {

// sum over every tensor of sum g^2, accumulated in double. `grads` are f32
// or bf16, contiguous, all on one CUDA device. One launch per dtype over
// all gradients of that dtype: every gradient is cut into fixed chunks, one
// block per chunk writes a partial sum (squares of f32 values accumulated
// in double), and one block adds the partials in one fixed order, so the
// result depends on the data and shapes only. Runs on the current stream
// and waits for it (the value is needed on the host).
double squared_sum(const std::vector<Tensor>& grads);

}  // namespace lt::optim::cuda
