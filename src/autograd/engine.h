#pragma once
#include "core/tensor.h"

namespace lt {

// Reverse-mode pass from `root`. `grad_root` defaults to ones (root must
// then have one element). Gradients accumulate into the `.grad` of every
// leaf that requires grad; each leaf's grad-ready hooks fire once its
// gradient is final. Saved tensors are released as nodes run, so the graph
// cannot be walked twice.
void backward(const Tensor& root, const Tensor& grad_root = Tensor());

namespace autograd {

// True when `grad` is the gradient of ones that the running backward() on
// this thread made for its root (no grad_root given): a node that would
// read its output gradient back to the host to scale by it (the fused LM
// head) knows it is 1 without waiting for the device.
bool is_unit_seed(const Tensor& grad);

}  // namespace autograd

}  // namespace lt
