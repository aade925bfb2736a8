#include "autograd/functions.h"
#include "autograd/record.h"
#include "autograd/trace.h"
#include "ops/activations.h"

namespace lt {

using Inputs = std::vector<Tensor>;

using autograd::record;

Tensor silu(const Tensor& x) {
  if (autograd::tracing())
    return autograd::traced("silu", {x}, {}, [](const Inputs& in) { return silu(in[0]); });
  Tensor dx = x.detach();
  return record("silu", {x}, ops::silu(dx),
                [dx](const Tensor& g) { return std::vector<Tensor>{ops::silu_backward(g, dx)}; });
}

Tensor gelu_tanh(const Tensor& x) {
  if (autograd::tracing())
    return autograd::traced("gelu_tanh", {x}, {},
                            [](const Inputs& in) { return gelu_tanh(in[0]); });
  Tensor dx = x.detach();
  return record("gelu_tanh", {x}, ops::gelu_tanh(dx), [dx](const Tensor& g) {
    return std::vector<Tensor>{ops::gelu_tanh_backward(g, dx)};
  });
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  if (autograd::tracing())
    return autograd::traced("swiglu", {gate, up}, {},
                            [](const Inputs& in) { return swiglu(in[0], in[1]); });
  Tensor dgate = gate.detach(), dup = up.detach();
  const bool need_gate = gate.requires_grad(), need_up = up.requires_grad();
  // Only the gate gradient reads up.
  Tensor saved_up = need_gate ? dup : Tensor();
  return record("swiglu", {gate, up}, ops::swiglu(dgate, dup), [=](const Tensor& g) {
    ops::SwigluGrads grads = ops::swiglu_backward(g, dgate, saved_up, need_gate, need_up);
    return std::vector<Tensor>{grads.gate, grads.up};
  });
}

Tensor softmax(const Tensor& x, int64_t dim) {
  if (autograd::tracing())
    return autograd::traced("softmax", {x}, {},
                            [dim](const Inputs& in) { return softmax(in[0], dim); });
  Tensor y = ops::softmax(x.detach(), dim);
  // Backward reads the output. Keep a detached handle: `y` itself gets this
  // node as grad_fn, and holding it would make node and output own each
  // other until backward runs.
  Tensor saved_y = y.detach();
  return record("softmax", {x}, y, [saved_y, dim](const Tensor& g) {
    return std::vector<Tensor>{ops::softmax_backward(g, saved_y, dim)};
  });
}

}  // namespace lt
