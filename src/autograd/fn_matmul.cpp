#include "autograd/engine.h"
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

namespace {

// The gradients of linear(x, weight, bias) from its output's, keeping only
// what the wanted ones read (x for the weight's, the weight for x's).
// `weight_input` is the weight's place among the recorded inputs, through
// which the engine may offer its .grad for the GEMM to add into (Note
// [Weight gradients summed by the GEMM], autograd/engine.h).
struct LinearBackward {
  Tensor saved_x, saved_weight;
  bool need_x, need_weight, need_bias;
  size_t weight_input;
  LinearBackward(const Tensor& x, const Tensor& weight, const Tensor& bias, size_t weight_input)
      : need_x(x.requires_grad()),
        need_weight(weight.requires_grad()),
        need_bias(bias.defined() && bias.requires_grad()),
        weight_input(weight_input) {
    if (need_weight) saved_x = x.detach();
    if (need_x) saved_weight = weight.detach();
  }
  ops::LinearGrads operator()(const Tensor& g) const {
    return ops::linear_backward(g, saved_x, saved_weight, need_x, need_weight, need_bias,
                                need_weight ? autograd::grad_sum_target(weight_input) : Tensor());
  }
};

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (autograd::tracing())
    return autograd::traced("linear", {x, weight, bias}, {},
                            [](const Inputs& in) { return linear(in[0], in[1], in[2]); });
  Tensor db = bias.defined() ? bias.detach() : Tensor();
  const LinearBackward grads_of(x, weight, bias, 1);
  return record("linear", {x, weight, bias}, ops::linear(x.detach(), weight.detach(), db),
                [grads_of](const Tensor& g) {
                  ops::LinearGrads grads = grads_of(g);
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
  const bool need_residual = residual.requires_grad();
  const LinearBackward grads_of(x, weight, bias, 2);
  Tensor unwritten = Tensor::empty(out_shape, x.dtype(), x.device());
  return record(
      "residual_linear_unread", {residual, x, weight, bias}, unwritten,
      [need_residual, grads_of](const Tensor& g) {
        ops::LinearGrads grads = grads_of(g);
        return std::vector<Tensor>{need_residual ? g : Tensor(), grads.x, grads.weight, grads.bias};
      });
}

}  // namespace lt
