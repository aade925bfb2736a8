#pragma once
// RoPE as a compiled kernel (issue 24): the fusion pass makes each
// rotary_embedding call (positions 0..T-1) a chain of its own, run here.
// The IR's one [rows, cols] space is rows = B*T*H head vectors, cols = D/2
// pairs, and the kernel reads everything in place through row maps
// (compile/graph.h's RowMap): each half of x's [B, T, H, D] rows (pitch
// 2, the second starting D/2 elements in), and the cos/sin tables once
// per H rows (group H) from an f32 [B*T, D/2] copy of the f64 [P, D/2]
// tables' first T rows, one per sequence (ops::rotary computes in f32 from
// them). It writes both halves of the output [B, T, H, D] in place alike.
// Its backward is the IR's gradient of the same graph (the rotation by the
// negative angle), read and written the same way: no copy of x, of the
// gradients or of the tables at the size of x.
#include <memory>

#include "autograd/fused_chain.h"

namespace lt::autograd {

// inputs: x_lo, x_hi (full, `dtype`, pitch 2), cos, sin (full, f32, one
// row per `heads` rows); outputs (pitch 2): x_lo cos - x_hi sin,
// x_hi cos + x_lo sin (`dtype`).
compile::KernelGraph rope_kernel_graph(DType dtype, int64_t heads);
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
  int64_t heads_ = 0;
  compile::KernelGraph forward_, backward_;
  compile::DeviceKernel forward_kernel_;
};

}  // namespace lt::autograd
