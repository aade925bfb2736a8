#include "autograd/functions.h"
#include "autograd/record.h"
#include "autograd/trace.h"
#include "ops/elementwise.h"

namespace lt {

using Inputs = std::vector<Tensor>;

using autograd::record;

// Views share storage with their input. Their backward maps the gradient
// back onto the input's shape; none of them saves a tensor.

Tensor reshape(const Tensor& a, const Shape& shape) {
  if (autograd::tracing())
    return autograd::traced("reshape", {a}, {},
                            [shape](const Inputs& in) { return reshape(in[0], shape); });
  Shape in = a.shape();
  return record("reshape", {a}, a.detach().reshape(shape),
                [in](const Tensor& g) { return std::vector<Tensor>{g.reshape(in)}; });
}

Tensor transpose(const Tensor& a, int64_t d0, int64_t d1) {
  if (autograd::tracing())
    return autograd::traced("transpose", {a}, {},
                            [d0, d1](const Inputs& in) { return transpose(in[0], d0, d1); });
  return record("transpose", {a}, a.detach().transpose(d0, d1),
                [d0, d1](const Tensor& g) { return std::vector<Tensor>{g.transpose(d0, d1)}; });
}

Tensor permute(const Tensor& a, const std::vector<int64_t>& order) {
  if (autograd::tracing())
    return autograd::traced("permute", {a}, {},
                            [order](const Inputs& in) { return permute(in[0], order); });
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    inverse[static_cast<size_t>(normalize_dim(order[i], a.dim()))] = static_cast<int64_t>(i);
  }
  return record("permute", {a}, a.detach().permute(order),
                [inverse](const Tensor& g) { return std::vector<Tensor>{g.permute(inverse)}; });
}

Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end) {
  if (autograd::tracing())
    return autograd::traced("slice", {a}, {}, [dim, start, end](const Inputs& in) {
      return slice(in[0], dim, start, end);
    });
  Shape in = a.shape();
  Tensor out = a.detach().slice(dim, start, end);
  // Recover the resolved start from the view's offset so negative and
  // clamped bounds behave exactly as the forward did.
  int64_t d = normalize_dim(dim, a.dim());
  int64_t resolved_start = a.shape()[d] == 0 || out.numel() == 0
                               ? 0
                               : (out.offset() - a.offset()) / std::max<int64_t>(a.stride(d), 1);
  int64_t len = out.shape()[d];
  return record("slice", {a}, out, [in, d, resolved_start, len](const Tensor& g) {
    Tensor full = Tensor::zeros(in, g.dtype(), g.device());
    full.slice(d, resolved_start, resolved_start + len).copy_(g);
    return std::vector<Tensor>{full};
  });
}

Tensor expand(const Tensor& a, const Shape& shape) {
  if (autograd::tracing())
    return autograd::traced("expand", {a}, {},
                            [shape](const Inputs& in) { return expand(in[0], shape); });
  Shape in = a.shape();
  return record("expand", {a}, a.detach().expand(shape),
                [in](const Tensor& g) { return std::vector<Tensor>{ops::sum_to(g, in)}; });
}

Tensor unsqueeze(const Tensor& a, int64_t dim) {
  if (autograd::tracing())
    return autograd::traced("unsqueeze", {a}, {},
                            [dim](const Inputs& in) { return unsqueeze(in[0], dim); });
  Shape in = a.shape();
  return record("unsqueeze", {a}, a.detach().unsqueeze(dim),
                [in](const Tensor& g) { return std::vector<Tensor>{g.reshape(in)}; });
}

Tensor squeeze(const Tensor& a, int64_t dim) {
  if (autograd::tracing())
    return autograd::traced("squeeze", {a}, {},
                            [dim](const Inputs& in) { return squeeze(in[0], dim); });
  Shape in = a.shape();
  return record("squeeze", {a}, a.detach().squeeze(dim),
                [in](const Tensor& g) { return std::vector<Tensor>{g.reshape(in)}; });
}

Tensor contiguous(const Tensor& a) {
  if (autograd::tracing())
    return autograd::traced("contiguous", {a}, {},
                            [](const Inputs& in) { return contiguous(in[0]); });
  return record("contiguous", {a}, a.detach().contiguous(),
                [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

}  // namespace lt
