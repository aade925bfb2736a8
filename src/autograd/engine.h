#pragma once
#include <cstdint>

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

// Note [Weight gradients summed by the GEMM]
// A chunked backward (the streaming executor's chunks, resident's
// micro-batches) adds each chunk's weight gradient into the weight's .grad.
// Added by a pass of its own, that reads and writes the whole .grad once
// more per chunk: at chunks of 8 sequences, 7 extra passes over every
// block's gradient a step. The weight-gradient GEMM can add its product
// into .grad itself (beta = 1), at no extra cost to the GEMM.
//
// So while a node's backward runs, this gives the .grad that the node's
// input `input`'s gradient is about to be added to, when the node may add
// into it in place instead: the input is a leaf reached by this one edge
// only, and its .grad is contiguous, of the leaf's shape, and held by
// nothing else (the conditions of the engine's own in-place sum). A node
// that adds into it returns that very tensor as the input's gradient; the
// engine then adds nothing and fires the leaf's hooks as usual. Undefined
// when the node may not (also outside a node's backward, and with
// LT_WEIGHT_GRAD_SUM=add, which keeps the separate pass). The sum lands in
// .grad when the node runs, before the leaf's hooks: a backward() that
// throws after it leaves that part in .grad, as a failed step leaves any
// gradient it made (the executors clear the gradients of a failed step).
Tensor grad_sum_target(size_t input);
// How many gradients the nodes of this thread's backward() calls have added
// into a .grad this way, since the thread began: for tests that must know
// the sum was not the separate pass's.
uint64_t grad_sums_in_place();

}  // namespace autograd

}  // namespace lt
