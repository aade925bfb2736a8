#include "autograd/fused_rope.h"

#include "autograd/record.h"
#include "compile/gradient.h"
#include "compile/tensor_call.h"
#include "core/error.h"

namespace lt::autograd {
namespace {

using compile::KernelGraph;
using compile::ShapeClass;
using compile::Value;

// The halves of x's last dim, each contiguous.
std::pair<Tensor, Tensor> halves(const Tensor& x) {
  const int64_t half = x.size(3) / 2;
  return {x.slice(3, 0, half).contiguous(), x.slice(3, half, 2 * half).contiguous()};
}

// The first T rows of an f64 [P, D/2] table as f32 [B, T, H, D/2].
Tensor expand_table(const Tensor& table, const Shape& half_shape) {
  const int64_t t = half_shape[1];
  LT_CHECK(table.dim() == 2 && table.size(0) >= t && table.size(1) == half_shape[3],
           "fusion: rope table ", table.str(), " does not cover ", t, " positions of ",
           half_shape[3], " pairs");
  return table.slice(0, 0, t)
      .to(DType::F32)
      .reshape({1, t, 1, half_shape[3]})
      .expand(half_shape)
      .contiguous();
}

Tensor join_halves(const Tensor& lo, const Tensor& hi, DType dtype) {
  Shape shape = lo.shape();
  const int64_t half = shape[3];
  shape[3] = 2 * half;
  Tensor out = Tensor::empty(shape, dtype, lo.device());
  out.slice(3, 0, half).copy_(lo);
  out.slice(3, half, 2 * half).copy_(hi);
  return out;
}

}  // namespace

KernelGraph rope_kernel_graph(DType dtype) {
  KernelGraph g;
  const Value lo = g.input(ShapeClass::Full, dtype);
  const Value hi = g.input(ShapeClass::Full, dtype);
  const Value cos = g.input(ShapeClass::Full, DType::F32);
  const Value sin = g.input(ShapeClass::Full, DType::F32);
  g.output(g.sub(g.mul(lo, cos), g.mul(hi, sin)), dtype);
  g.output(g.add(g.mul(hi, cos), g.mul(lo, sin)), dtype);
  return g;
}

compile::KernelGraph rope_gradient_graph(const compile::KernelGraph& forward) {
  // Gradients in the activations' dtype, as the fused chains' (compile/gradient.h).
  return compile::gradient_graph(forward, {true, true, false, false},
                                 compile::GradientStorage::AsTheForward);
}

FusedRopeKernel::FusedRopeKernel(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                                 compile::KernelCache& cache, Device device)
    : cache_(cache), device_(device) {
  const FusedChain& c = plan.chains.at(static_cast<size_t>(chain));
  LT_CHECK(c.nodes.size() == 1, "fusion: a rope chain has one call, got ", c.nodes.size());
  const CallNode& n = graph.nodes[static_cast<size_t>(c.nodes[0])];
  inputs_ = {n.inputs[0], n.inputs[2], n.inputs[3]};  // x, cos, sin
  outputs_ = {n.output};
  dtype_ = graph.dtypes[static_cast<size_t>(n.output)];
  forward_ = rope_kernel_graph(dtype_);
  backward_ = rope_gradient_graph(forward_);
  forward_kernel_ = compile::kernel_for(cache_, forward_, device_);
}

std::vector<Tensor> FusedRopeKernel::run(const std::vector<Tensor>& inputs) const {
  LT_CHECK(inputs.size() == 3, "fusion: rope takes x, cos and sin");
  const Tensor& x = inputs[0];
  auto [lo, hi] = halves(x.detach());
  const Tensor cos = expand_table(inputs[1], lo.shape());
  const Tensor sin = expand_table(inputs[2], lo.shape());
  std::vector<Tensor> out = compile::call(forward_kernel_, forward_, {lo, hi, cos, sin});
  Tensor y = join_halves(out[0], out[1], dtype_);
  if (!needs_graph({&x})) return {y};
  return {record("fused_rope", {x}, y, [self = shared_from_this(), cos, sin](const Tensor& g) {
    auto [g_lo, g_hi] = halves(g.dtype() == self->dtype_ ? g : g.to(self->dtype_));
    // The rotation is linear in x: its gradient reads no x.
    const Tensor zeros = Tensor::zeros(g_lo.shape(), self->dtype_, self->device_);
    const compile::DeviceKernel kernel =
        compile::kernel_for(self->cache_, self->backward_, self->device_);
    std::vector<Tensor> grads =
        compile::call(kernel, self->backward_, {zeros, zeros, cos, sin, g_lo, g_hi});
    return std::vector<Tensor>{join_halves(grads[0], grads[1], self->dtype_)};
  })};
}

}  // namespace lt::autograd
