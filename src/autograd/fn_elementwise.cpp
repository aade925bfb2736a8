#include "autograd/functions.h"
#include "autograd/record.h"
#include "autograd/trace.h"
#include "ops/elementwise.h"

namespace lt {

using Inputs = std::vector<Tensor>;

using autograd::record;

Tensor add(const Tensor& a, const Tensor& b) {
  if (autograd::tracing())
    return autograd::traced("add", {a, b}, {}, [](const Inputs& in) { return add(in[0], in[1]); });
  Shape sa = a.shape(), sb = b.shape();
  return record("add", {a, b}, ops::add(a.detach(), b.detach()), [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{ops::sum_to(g, sa), ops::sum_to(g, sb)};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  if (autograd::tracing())
    return autograd::traced("sub", {a, b}, {}, [](const Inputs& in) { return sub(in[0], in[1]); });
  Shape sa = a.shape(), sb = b.shape();
  return record("sub", {a, b}, ops::sub(a.detach(), b.detach()), [sa, sb](const Tensor& g) {
    return std::vector<Tensor>{ops::sum_to(g, sa), ops::sum_to(ops::scale(g, -1.0), sb)};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  if (autograd::tracing())
    return autograd::traced("mul", {a, b}, {}, [](const Inputs& in) { return mul(in[0], in[1]); });
  Tensor da = a.detach(), db = b.detach();
  bool need_a = a.requires_grad(), need_b = b.requires_grad();
  return record("mul", {a, b}, ops::mul(da, db), [da, db, need_a, need_b](const Tensor& g) {
    return std::vector<Tensor>{need_a ? ops::sum_to(ops::mul(g, db), da.shape()) : Tensor(),
                               need_b ? ops::sum_to(ops::mul(g, da), db.shape()) : Tensor()};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  if (autograd::tracing())
    return autograd::traced("div", {a, b}, {}, [](const Inputs& in) { return div(in[0], in[1]); });
  Tensor da = a.detach(), db = b.detach();
  Tensor out = ops::div(da, db);
  bool need_b = b.requires_grad();
  // d(a/b)/db = -a/b^2 = -out/b; keep `out` rather than recompute it. A
  // detached handle: the returned one will own this node, and the node
  // must not own it back.
  Tensor saved_out = need_b ? out.detach() : Tensor();
  return record("div", {a, b}, out, [da, db, saved_out](const Tensor& g) {
    Tensor gb;
    if (saved_out.defined()) {
      gb = ops::sum_to(ops::scale(ops::div(ops::mul(g, saved_out), db), -1.0), db.shape());
    }
    return std::vector<Tensor>{ops::sum_to(ops::div(g, db), da.shape()), gb};
  });
}

Tensor scale(const Tensor& a, double s) {
  if (autograd::tracing())
    return autograd::traced("scale", {a}, {s}, [s](const Inputs& in) { return scale(in[0], s); });
  return record("scale", {a}, ops::scale(a.detach(), s),
                [s](const Tensor& g) { return std::vector<Tensor>{ops::scale(g, s)}; });
}

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  if (autograd::tracing())
    return autograd::traced(
        "sum", {a}, {}, [dims, keepdim](const Inputs& in) { return sum(in[0], dims, keepdim); });
  Shape in_shape = a.shape();
  Tensor out = ops::sum(a.detach(), dims, keepdim);
  // The gradient broadcasts back; without keepdim the reduced dims are
  // re-inserted as size 1 first.
  Shape kept = in_shape;
  for (int64_t d : dims) kept[normalize_dim(d, a.dim())] = 1;
  return record("sum", {a}, out, [in_shape, kept](const Tensor& g) {
    Tensor gk = g.reshape(kept);
    return std::vector<Tensor>{gk.expand(in_shape).contiguous()};
  });
}

Tensor sum(const Tensor& a) {
  if (autograd::tracing())
    return autograd::traced("sum", {a}, {}, [](const Inputs& in) { return sum(in[0]); });
  std::vector<int64_t> dims(static_cast<size_t>(a.dim()));
  for (int64_t d = 0; d < a.dim(); ++d) dims[d] = d;
  return sum(a, dims, false);
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  if (autograd::tracing())
    return autograd::traced(
        "mean", {a}, {}, [dims, keepdim](const Inputs& in) { return mean(in[0], dims, keepdim); });
  int64_t count = 1;
  for (int64_t d : dims) count *= a.shape()[normalize_dim(d, a.dim())];
  LT_CHECK(count > 0, "mean over no elements of ", a.str());
  return scale(sum(a, dims, keepdim), 1.0 / static_cast<double>(count));
}

Tensor mean(const Tensor& a) {
  if (autograd::tracing())
    return autograd::traced("mean", {a}, {}, [](const Inputs& in) { return mean(in[0]); });
  return scale(sum(a), 1.0 / static_cast<double>(a.numel()));
}

Tensor cast(const Tensor& a, DType dtype) {
  if (autograd::tracing())
    return autograd::traced("cast", {a}, {},
                            [dtype](const Inputs& in) { return cast(in[0], dtype); });
  DType from = a.dtype();
  return record("cast", {a}, ops::cast(a, dtype),
                [from](const Tensor& g) { return std::vector<Tensor>{ops::cast(g, from)}; });
}

}  // namespace lt
