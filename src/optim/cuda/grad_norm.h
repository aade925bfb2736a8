#pragma once
// The CUDA sum of squared gradients behind optim/clip.cpp. Declared without
// CUDA types; defined only when LT_WITH_CUDA.
#include <vector>

#include "core/tensor.h"

namespace lt::optim::cuda {

// sum over every tensor of sum g^2, accumulated in double. `grads` are f32
// or bf16, contiguous, all on one CUDA device. Deterministic: each tensor
// is reduced by a fixed number of blocks into per-block partials, and the
// partials (then the per-tensor sums) are added in one fixed order, so the
// result depends on the data and shapes only. Runs on the current stream
// and waits for it (the value is needed on the host).
double squared_sum(const std::vector<Tensor>& grads);

}  // namespace lt::optim::cuda
