#pragma once
// RoPE as a compiled kernel (issue 24): the fusion pass makes each
// rotary_embedding call (positions 0..T-1) a chain of its own, run here.
// The IR has one [rows, cols] space with row and col broadcasts only, so
// the call is laid out for it: rows = B*T*H, cols = D/2, the two halves of
// each head vector as two full inputs, and the cos/sin tables expanded to
// full f32 values (the tables are f64 [P, D/2]; ops::rotary computes in f32
// from them). The kernel writes both halves, joined into [B, T, H, D]. Its
// backward is the IR's gradient of the same graph (the rotation by the
// negative angle). The copies in and out make it slower than ops::rotary;
// it is here so that the pass covers the chain and the GPU path inherits
// the graph.
#include <memory>

#include "autograd/fused_chain.h"

namespace lt::autograd {

// inputs: x_lo, x_hi (full, `dtype`), cos, sin (full, f32); outputs:
// x_lo cos - x_hi sin, x_hi cos + x_lo sin (full, `dtype`).
compile::KernelGraph rope_kernel_graph(DType dtype);
// Its backward: the gradients of x's halves (the tables need none).
compile::KernelGraph rope_gradient_graph(const compile::KernelGraph& forward);

class FusedRopeKernel : public ChainKernel, public std::enable_shared_from_this<FusedRopeKernel> {
 public:
  // The chain's one node: rotary_embedding(x, -1, cos, sin).
  FusedRopeKernel(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                  compile::KernelCache& cache, Device device = Device::cpu());
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const override;

 private:
  compile::KernelCache& cache_;
  Device device_;
  DType dtype_;
  compile::KernelGraph forward_, backward_;
  compile::DeviceKernel forward_kernel_;
};

}  // namespace lt::autograd
