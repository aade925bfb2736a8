#pragma once
#include "core/tensor.h"

namespace lt {

// Reverse-mode pass from `root`. `grad_root` defaults to ones (root must
// then have one element). Gradients accumulate into the `.grad` of every
// leaf that requires grad; each leaf's grad-ready hooks fire once its
// gradient is final. Saved tensors are released as nodes run, so the graph
// cannot be walked twice.
void backward(const Tensor& root, const Tensor& grad_root = Tensor());

}  // namespace lt
