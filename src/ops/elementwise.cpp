#include "ops/elementwise.h"

#include <algorithm>

#include "core/strided.h"
#include "core/thread_pool.h"
#include "ops/common.h"
#include "ops/cuda/elementwise.h"

namespace lt::ops {

namespace {

enum class BinaryOp { Add, Sub, Mul, Div };

template <typename T>
inline T apply(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::Add:
      return x + y;
    case BinaryOp::Sub:
      return x - y;
    case BinaryOp::Mul:
      return x * y;
    case BinaryOp::Div:
      return x / y;
  }
  return T{};
}

template <typename T>
void binary_kernel(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const Shape& shape = out.shape();
  const Shape sa = broadcast_strides(a, shape), sb = broadcast_strides(b, shape);
  const T* pa = static_cast<const T*>(a.storage()->data());
  const T* pb = static_cast<const T*>(b.storage()->data());
  T* po = out.data<T>();
  if (a.shape() == shape && b.shape() == shape && a.is_contiguous() && b.is_contiguous()) {
    const T* xa = pa + a.offset();
    const T* xb = pb + b.offset();
    parallel_for(0, out.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) po[i] = apply(op, xa[i], xb[i]);
    });
    return;
  }
  const Shape so = out.strides();
  StridedOperands<3> operands{{so.data(), sa.data(), sb.data()}, {0, a.offset(), b.offset()}};
  for_each_run(shape, operands,
               [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
                 for (int64_t i = 0; i < n; ++i) {
                   po[off[0] + i * st[0]] =
                       apply(op, pa[off[1] + i * st[1]], pb[off[2] + i * st[2]]);
                 }
               });
}

Tensor binary(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  Device device = common_device({&a, &b}, name);
  LT_CHECK(a.dtype() == b.dtype(), name, ": dtypes differ (", dtype_name(a.dtype()), " and ",
           dtype_name(b.dtype()), ")");
  check_floating(a, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) {
    cuda::BinaryKind kind = cuda::BinaryKind::Add;
    switch (op) {
      case BinaryOp::Add:
        kind = cuda::BinaryKind::Add;
        break;
      case BinaryOp::Sub:
        kind = cuda::BinaryKind::Sub;
        break;
      case BinaryOp::Mul:
        kind = cuda::BinaryKind::Mul;
        break;
      case BinaryOp::Div:
        kind = cuda::BinaryKind::Div;
        break;
    }
    return cuda::binary(kind, a, b, shape);
  }
#endif
  if (!device.is_cpu()) no_kernel(name, device);
  const DType ct = compute_dtype(a.dtype());
  // Widen only half-precision inputs; f32/f64 are read in place, strided.
  Tensor ca = a.dtype() == ct ? a : a.to(ct);
  Tensor cb = b.dtype() == ct ? b : b.to(ct);
  Tensor out = Tensor::empty(shape, ct);
  dispatch_floating(ct, [&](auto t) { binary_kernel<decltype(t)>(op, ca, cb, out); });
  return out.to(a.dtype());
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::Add, "add", a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::Sub, "sub", a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::Mul, "mul", a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary(BinaryOp::Div, "div", a, b);
}

void add_(const Tensor& dst, const Tensor& src) {
  LT_CHECK(dst.shape() == src.shape() && dst.dtype() == src.dtype(), "add_: ", dst.str(), " and ",
           src.str(), " differ");
  LT_CHECK(dst.is_contiguous(), "add_: the destination must be contiguous, got ", dst.str());
  check_floating(dst, "add_");
  // Another view into dst's own storage could be read after some of its
  // elements are written (dst itself is fine: each element is read first).
  LT_CHECK(dst.storage() != src.storage() ||
               (src.offset() == dst.offset() && src.strides() == dst.strides()),
           "add_: the source ", src.str(), " is another view of the destination's memory");
  const Device device = common_device({&dst, &src}, "add_");
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) {
    cuda::binary_into(cuda::BinaryKind::Add, dst, src, dst);
    return;
  }
#endif
  if (!device.is_cpu()) no_kernel("add_", device);
  if (dst.dtype() != compute_dtype(dst.dtype())) {  // half precision: widen, add, round once
    dst.copy_(add(dst, src));
    return;
  }
  const Tensor s = src.contiguous();
  dispatch_floating(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = dst.data<T>();
    const T* x = s.data<T>();
    parallel_for(0, dst.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) d[i] += x[i];
    });
  });
}

Tensor axpby(const Tensor& a, double s, const Tensor& b, double t) {
  LT_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), "axpby: ", a.str(), " and ", b.str(),
           " differ");
  check_floating(a, "axpby");
  Device device = common_device({&a, &b}, "axpby");
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) return cuda::axpby(a, s, b, t);
#endif
  if (!device.is_cpu()) no_kernel("axpby", device);
  Tensor ca = as_compute(a), cb = as_compute(b);
  Tensor out = Tensor::empty(a.shape(), ca.dtype());
  dispatch_floating(ca.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = ca.data<T>();
    const T* y = cb.data<T>();
    T* o = out.data<T>();
    const T ts = static_cast<T>(s), tt = static_cast<T>(t);
    parallel_for(0, out.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = x[i] * ts + y[i] * tt;
    });
  });
  return out.to(a.dtype());
}

Tensor scale(const Tensor& a, double s) {
  check_floating(a, "scale");
#ifdef LT_WITH_CUDA
  if (a.device().is_cuda()) return cuda::scale(a, s);
#endif
  if (!a.device().is_cpu()) no_kernel("scale", a.device());
  Tensor ca = as_compute(a);
  Tensor out = Tensor::empty(a.shape(), ca.dtype());
  dispatch_floating(ca.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* x = ca.data<T>();
    T* o = out.data<T>();
    const T ts = static_cast<T>(s);
    parallel_for(0, out.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = x[i] * ts;
    });
  });
  return out.to(a.dtype());
}

Tensor sum(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  check_floating(a, "sum");
  const int64_t rank = a.dim();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t d : dims) {
    int64_t nd = normalize_dim(d, rank);
    LT_CHECK(!reduced[nd], "sum: dimension ", d, " listed twice");
    reduced[nd] = true;
  }
  // Move kept dims first and reduced dims last, then sum each row.
  std::vector<int64_t> order;
  Shape kept_shape, out_shape;
  int64_t inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      order.push_back(d);
      kept_shape.push_back(a.shape()[d]);
    }
    if (reduced[d]) {
      if (keepdim) out_shape.push_back(1);
    } else {
      out_shape.push_back(a.shape()[d]);
    }
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      order.push_back(d);
      inner *= a.shape()[d];
    }
  }
#ifdef LT_WITH_CUDA
  if (a.device().is_cuda()) return cuda::sum(a.detach(), reduced, out_shape);
#endif
  if (!a.device().is_cpu()) no_kernel("sum", a.device());
  const DType ct = compute_dtype(a.dtype());
  Tensor src = a.detach().permute(order).contiguous().to(ct);
  const int64_t rows = numel(kept_shape);
  Tensor out = Tensor::empty(out_shape, ct);
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    const T* x = src.data<T>();
    T* o = out.data<T>();
    parallel_for(0, rows, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(inner, 1)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t r = lo; r < hi; ++r) {
                     double acc = 0;
                     const T* row = x + r * inner;
                     for (int64_t i = 0; i < inner; ++i) acc += row[i];
                     o[r] = static_cast<T>(acc);
                   }
                 });
  });
  return out.to(a.dtype());
}

Tensor sum_all(const Tensor& a) {
  std::vector<int64_t> dims(static_cast<size_t>(a.dim()));
  for (int64_t d = 0; d < a.dim(); ++d) dims[d] = d;
  return sum(a, dims, false);
}

Tensor mean(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  int64_t count = 1;
  for (int64_t d : dims) count *= a.shape()[normalize_dim(d, a.dim())];
  LT_CHECK(count > 0, "mean over an empty set of elements of ", a.str());
  return scale(sum(a, dims, keepdim), 1.0 / static_cast<double>(count));
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  LT_CHECK(lead >= 0, "sum_to: cannot reduce ", g.str(), " to ", shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else if (shape[d - lead] == 1 && g.shape()[d] != 1) {
      dims.push_back(d);
    } else {
      LT_CHECK(shape[d - lead] == g.shape()[d], "sum_to: cannot reduce ", g.str(), " to ",
               shape_str(shape));
    }
  }
  return sum(g, dims, true).reshape(shape);
}

Tensor cast(const Tensor& a, DType dtype) {
  return a.detach().to(dtype);
}

}  // namespace lt::ops
