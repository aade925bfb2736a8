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

// The halves of x's [B, T, H, D] (contiguous) as [B, T, H, D/2] views,
// rows D apart: what the graph's pitch-2 values read and write.
std::pair<Tensor, Tensor> halves(const Tensor& x) {
  const int64_t half = x.size(3) / 2;
  return {x.slice(3, 0, half), x.slice(3, half, 2 * half)};
}

// The first T rows of an f64 [P, D/2] table in f32, once per sequence of
// x's [B, T, H, D]: [B*T, D/2], which the graph reads once per H rows.
Tensor table_per_sequence(const Tensor& table, const Tensor& x) {
  const int64_t batch = x.size(0), t = x.size(1), half = x.size(3) / 2;
  LT_CHECK(table.dim() == 2 && table.size(0) >= t && table.size(1) == half, "fusion: rope table ",
           table.str(), " does not cover ", t, " positions of ", half, " pairs");
  const Tensor rows = table.slice(0, 0, t).to(DType::F32);
  const Tensor per_sequence = batch == 1 ? rows
                                         : rows.reshape({1, t, half})
                                               .expand({batch, t, half})
                                               .contiguous()
                                               .reshape({batch * t, half});
  // With one head the map is the identity: the table is then read as a
  // dense value, whose leading dims must be x's.
  return x.size(2) == 1 ? per_sequence.reshape({batch, t, 1, half}) : per_sequence;
}

}  // namespace

KernelGraph rope_kernel_graph(DType dtype, int64_t heads) {
  KernelGraph g;
  const compile::RowMap half{.pitch = 2}, per_position{.group = heads};
  const Value lo = g.mapped_input(dtype, half);
  const Value hi = g.mapped_input(dtype, half);
  const Value cos = g.mapped_input(DType::F32, per_position);
  const Value sin = g.mapped_input(DType::F32, per_position);
  g.output_pitched(g.sub(g.mul(lo, cos), g.mul(hi, sin)), dtype, 2);
  g.output_pitched(g.add(g.mul(hi, cos), g.mul(lo, sin)), dtype, 2);
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
  const Shape& x = graph.shapes[static_cast<size_t>(n.inputs[0])];
  LT_CHECK(x.size() == 4 && x[3] % 2 == 0, "fusion: rope takes x [B, T, H, D], got ", shape_str(x));
  heads_ = x[2];
  forward_ = rope_kernel_graph(dtype_, heads_);
  backward_ = rope_gradient_graph(forward_);
  forward_kernel_ = compile::kernel_for(cache_, forward_, device_);
}

std::vector<Tensor> FusedRopeKernel::run(const std::vector<Tensor>& inputs) const {
  LT_CHECK(inputs.size() == 3, "fusion: rope takes x, cos and sin");
  const Tensor& x = inputs[0];
  LT_CHECK(x.dim() == 4 && x.size(2) == heads_, "fusion: rope was planned for ", heads_,
           " heads, got x ", x.str());
  const Tensor xs = x.detach().contiguous();
  const Tensor cos = table_per_sequence(inputs[1], xs);
  const Tensor sin = table_per_sequence(inputs[2], xs);
  Tensor y = Tensor::empty(xs.shape(), dtype_, device_);
  {
    auto [lo, hi] = halves(xs);
    auto [y_lo, y_hi] = halves(y);
    compile::call(forward_kernel_, forward_, {lo, hi, cos, sin}, {y_lo, y_hi});
  }
  if (!needs_graph({&x})) return {y};
  return {record("fused_rope", {x}, y, [self = shared_from_this(), cos, sin](const Tensor& g) {
    const Tensor gs = (g.dtype() == self->dtype_ ? g : g.to(self->dtype_)).contiguous();
    auto [g_lo, g_hi] = halves(gs);
    Tensor dx = Tensor::empty(gs.shape(), self->dtype_, self->device_);
    auto [dx_lo, dx_hi] = halves(dx);
    const compile::DeviceKernel kernel =
        compile::kernel_for(self->cache_, self->backward_, self->device_);
    // The rotation is linear in x: its gradient reads no x, so g's halves
    // stand in for x's.
    compile::call(kernel, self->backward_, {g_lo, g_hi, cos, sin, g_lo, g_hi}, {dx_lo, dx_hi});
    return std::vector<Tensor>{dx};
  })};
}

}  // namespace lt::autograd
