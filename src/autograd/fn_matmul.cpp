#include "autograd/functions.h"
#include "autograd/record.h"
#include "autograd/trace.h"
#include "ops/matmul.h"

namespace lt {

using Inputs = std::vector<Tensor>;

using autograd::record;

// The gradient of a reads only b and that of b only a, so each closure
// keeps just the tensors its wanted gradients read: a frozen operand's
// partner is not held alive by the tape.

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  if (autograd::tracing())
    return autograd::traced("matmul", {a, b}, {}, [trans_a, trans_b](const Inputs& in) {
      return matmul(in[0], in[1], trans_a, trans_b);
    });
  Tensor da = a.detach(), db = b.detach();
  const bool need_a = a.requires_grad(), need_b = b.requires_grad();
  const bool b_shared = db.dim() == 2;
  Tensor saved_a = need_b ? da : Tensor(), saved_b = need_a ? db : Tensor();
  return record("matmul", {a, b}, ops::matmul(da, db, trans_a, trans_b), [=](const Tensor& g) {
    return std::vector<Tensor>{
        need_a ? ops::matmul_backward_a(g, saved_b, trans_a, trans_b) : Tensor(),
        need_b ? ops::matmul_backward_b(g, saved_a, trans_a, trans_b, b_shared) : Tensor()};
  });
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (autograd::tracing())
    return autograd::traced("linear", {x, weight, bias}, {},
                            [](const Inputs& in) { return linear(in[0], in[1], in[2]); });
  Tensor dx = x.detach(), dw = weight.detach();
  Tensor db = bias.defined() ? bias.detach() : Tensor();
  const bool need_x = x.requires_grad(), need_weight = weight.requires_grad();
  const bool need_bias = bias.defined() && bias.requires_grad();
  Tensor saved_x = need_weight ? dx : Tensor(), saved_weight = need_x ? dw : Tensor();
  return record("linear", {x, weight, bias}, ops::linear(dx, dw, db), [=](const Tensor& g) {
    ops::LinearGrads grads =
        ops::linear_backward(g, saved_x, saved_weight, need_x, need_weight, need_bias);
    return std::vector<Tensor>{grads.x, grads.weight, grads.bias};
  });
}

Tensor residual_linear_unread(const Tensor& residual, const Tensor& x, const Tensor& weight,
                              const Tensor& bias) {
  if (autograd::tracing() || !autograd::needs_graph({&residual, &x, &weight, &bias}))
    return add(residual, linear(x, weight, bias));
  Shape out_shape = x.shape();
  LT_CHECK(x.dim() >= 1 && weight.dim() == 2 && !out_shape.empty(), "residual_linear_unread: x ",
           x.str(), " and weight ", weight.str(), " do not chain");
  out_shape.back() = weight.size(0);
  LT_CHECK(out_shape == residual.shape() && residual.dtype() == x.dtype(),
           "residual_linear_unread: residual ", residual.str(), " is not the shape and dtype of ",
           "linear(", x.str(), ", ", weight.str(), ")");
  const bool need_residual = residual.requires_grad(), need_x = x.requires_grad();
  const bool need_weight = weight.requires_grad();
  const bool need_bias = bias.defined() && bias.requires_grad();
  Tensor saved_x = need_weight ? x.detach() : Tensor();
  Tensor saved_weight = need_x ? weight.detach() : Tensor();
  Tensor unwritten = Tensor::empty(out_shape, x.dtype(), x.device());
  return record(
      "residual_linear_unread", {residual, x, weight, bias}, unwritten, [=](const Tensor& g) {
        ops::LinearGrads grads =
            ops::linear_backward(g, saved_x, saved_weight, need_x, need_weight, need_bias);
        return std::vector<Tensor>{need_residual ? g : Tensor(), grads.x, grads.weight, grads.bias};
      });
}

}  // namespace lt
