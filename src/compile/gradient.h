#pragma once
// Reverse-mode differentiation of a KernelGraph, in the IR itself: the
// backward of a fused chain is one more kernel graph, compiled and cached
// like the forward (autograd/fused_program.h runs both).
//
// The backward graph recomputes what it needs of the forward from the
// forward's inputs (nothing but the inputs is saved), so it takes:
//   the forward's inputs, in order, then
//   one gradient per forward output, of that output's shape class, f32;
// and writes, for each forward input with `needs_grad`, in input order:
//   Full input: its gradient, Full, f32;
//   Row input:  its gradient, Row, f32;
//   Col input:  its gradient, Col, f32: the per-element contributions
//               summed over the rows in the kernel (KernelGraph::col_sum).
// Gradients flow through Cast unchanged (as autograd's cast does), and
// Less and Select's condition pass none.
//
// GradientStorage::AsTheForward stores what the caller would otherwise
// convert around the kernel: each output's gradient is read in that
// output's stored dtype, and a Full input's gradient written in that
// input's stored dtype (the kernel still computes in f32; Row and Col
// gradients stay f32, as their sums need). With bf16 activations
// this halves those tensors' bytes and drops a cast pass over each, and
// the values are the same bit for bit as reading an upcast gradient and
// casting the result down (an upcast is exact; the down-cast rounds once,
// the same way).
#include <vector>

#include "compile/graph.h"

namespace lt::compile {

enum class GradientStorage { F32, AsTheForward };

KernelGraph gradient_graph(const KernelGraph& forward, const std::vector<bool>& needs_grad,
                           GradientStorage storage = GradientStorage::F32);

}  // namespace lt::compile
