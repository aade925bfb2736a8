#include "ops/activations.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "core/thread_pool.h"
#include "ops/common.h"
#include "ops/cuda/activations.h"

namespace lt::ops {

namespace {

// Elements per parallel task. Each element costs an exp or tanh, so a task
// of this size is far more work than handing it to a worker.
constexpr int64_t kGrain = 1 << 14;

// sqrt(2 / pi) and the cubic coefficient of GPT-2's tanh approximation.
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

template <typename T>
inline T sigmoid(T x) {
  // exp(-x) overflows to inf for very negative x, giving 1 / inf = 0: the
  // right limit, so no branch is needed.
  return T{1} / (T{1} + std::exp(-x));
}

template <typename T, size_t N, typename Fn, size_t... I>
void map_range(const Fn& fn, const std::array<const T*, N>& in, T* out, int64_t lo, int64_t hi,
               std::index_sequence<I...>) {
  for (int64_t i = lo; i < hi; ++i) out[i] = fn(in[I][i]...);
}

// out[i] = fn(a[i], rest[i]...) over same-shape inputs, computed in the
// compute dtype of `out_dtype` and returned in `out_dtype`. `fn` is generic
// so that one lambda serves f32 and f64.
// The device of a map's inputs, after checking that they are floating, on
// one device, and of one shape.
template <typename... Rest>
Device map_device(const char* op, const Tensor& a, const Rest&... rest) {
  const Device device = common_device({&a, &rest...}, op);
  check_floating(a, op);
  (check_floating(rest, op), ...);
  LT_CHECK(((rest.shape() == a.shape()) && ...), op, ": input shapes differ (", a.str(),
           (std::string() + ... + (", " + rest.str())), ")");
  return device;
}

template <typename Fn, typename... Rest>
Tensor map_elementwise(const char* op, DType out_dtype, const Fn& fn, const Tensor& a,
                       const Rest&... rest) {
  const Device device = map_device(op, a, rest...);
  if (!device.is_cpu()) no_kernel(op, device);
  const DType ct = compute_dtype(out_dtype);
  constexpr size_t kInputs = 1 + sizeof...(Rest);
  const std::array<Tensor, kInputs> inputs{a.detach().to(ct).contiguous(),
                                           rest.detach().to(ct).contiguous()...};
  Tensor out = Tensor::empty(a.shape(), ct);
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    std::array<const T*, kInputs> in;
    for (size_t k = 0; k < kInputs; ++k) in[k] = inputs[k].template data<T>();
    T* po = out.data<T>();
    parallel_for(0, out.numel(), kGrain, [&](int64_t lo, int64_t hi) {
      map_range<T, kInputs>(fn, in, po, lo, hi, std::make_index_sequence<kInputs>{});
    });
  });
  return out.to(out_dtype);
}

// A tensor seen as lines along one dim of a contiguous layout: `count`
// lines of `length` elements, `stride` apart (the product of the later
// dims). Line j starts at (j / stride) * length * stride + j % stride.
struct Lines {
  int64_t count, length, stride;
  int64_t start(int64_t j) const { return (j / stride) * length * stride + j % stride; }
};

Lines lines_along(const Shape& shape, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d) inner *= shape[d];
  return {outer * inner, shape[dim], inner};
}

template <typename Fn>
void for_each_line(const Lines& lines, const Fn& fn) {
  const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(lines.length, 1));
  parallel_for(0, lines.count, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) fn(lines.start(j));
  });
}

}  // namespace

Tensor silu(const Tensor& x) {
#ifdef LT_WITH_CUDA
  if (map_device("silu", x).is_cuda()) return cuda::silu(x);
#endif
  return map_elementwise(
      "silu", x.dtype(), [](auto v) { return v * sigmoid(v); }, x);
}

Tensor silu_backward(const Tensor& grad_out, const Tensor& x) {
#ifdef LT_WITH_CUDA
  if (map_device("silu_backward", x, grad_out).is_cuda()) return cuda::silu_backward(grad_out, x);
#endif
  // silu'(x) = s (1 + x (1 - s)) with s = sigmoid(x).
  return map_elementwise(
      "silu_backward", x.dtype(),
      [](auto v, auto g) {
        const auto s = sigmoid(v);
        return g * s * (1 + v * (1 - s));
      },
      x, grad_out);
}

Tensor gelu_tanh(const Tensor& x) {
#ifdef LT_WITH_CUDA
  if (map_device("gelu_tanh", x).is_cuda()) return cuda::gelu_tanh(x);
#endif
  return map_elementwise(
      "gelu_tanh", x.dtype(),
      [](auto v) {
        using T = decltype(v);
        const T u = T(kSqrt2OverPi) * (v + T(kGeluCubic) * v * v * v);
        return T(0.5) * v * (1 + std::tanh(u));
      },
      x);
}

Tensor gelu_tanh_backward(const Tensor& grad_out, const Tensor& x) {
#ifdef LT_WITH_CUDA
  if (map_device("gelu_tanh_backward", x, grad_out).is_cuda()) {
    return cuda::gelu_tanh_backward(grad_out, x);
  }
#endif
  // d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx, with t = tanh(u) and
  // du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
  return map_elementwise(
      "gelu_tanh_backward", x.dtype(),
      [](auto v, auto g) {
        using T = decltype(v);
        const T u = T(kSqrt2OverPi) * (v + T(kGeluCubic) * v * v * v);
        const T t = std::tanh(u);
        const T du = T(kSqrt2OverPi) * (1 + T(3 * kGeluCubic) * v * v);
        return g * (T(0.5) * (1 + t) + T(0.5) * v * (1 - t * t) * du);
      },
      x, grad_out);
}

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  LT_CHECK(gate.dtype() == up.dtype(), "swiglu: dtypes differ (", dtype_name(gate.dtype()), " and ",
           dtype_name(up.dtype()), ")");
#ifdef LT_WITH_CUDA
  if (map_device("swiglu", gate, up).is_cuda()) return cuda::swiglu(gate, up);
#endif
  return map_elementwise(
      "swiglu", gate.dtype(), [](auto gv, auto uv) { return gv * sigmoid(gv) * uv; }, gate, up);
}

SwigluGrads swiglu_backward(const Tensor& grad_out, const Tensor& gate, const Tensor& up,
                            bool need_gate, bool need_up) {
  SwigluGrads grads;
  if (need_gate) {
    LT_CHECK(up.defined(), "swiglu_backward: the gate gradient needs up");
#ifdef LT_WITH_CUDA
    if (map_device("swiglu_backward", gate, up, grad_out).is_cuda()) {
      grads.gate = cuda::swiglu_backward_gate(grad_out, gate, up);
    }
#endif
    if (!grads.gate.defined()) {
      grads.gate = map_elementwise(
          "swiglu_backward", gate.dtype(),
          [](auto gv, auto uv, auto g) {
            const auto s = sigmoid(gv);
            return g * uv * s * (1 + gv * (1 - s));
          },
          gate, up, grad_out);
    }
  }
  if (need_up) {
#ifdef LT_WITH_CUDA
    if (map_device("swiglu_backward", gate, grad_out).is_cuda()) {
      grads.up = cuda::swiglu_backward_up(grad_out, gate);
    }
#endif
    if (!grads.up.defined()) {
      grads.up = map_elementwise(
          "swiglu_backward", gate.dtype(), [](auto gv, auto g) { return g * gv * sigmoid(gv); },
          gate, grad_out);
    }
  }
  return grads;
}

Tensor softmax(const Tensor& x, int64_t dim) {
  check_floating(x, "softmax");
  LT_CHECK(x.dim() >= 1, "softmax of a 0-dim tensor ", x.str());
#ifdef LT_WITH_CUDA
  if (x.device().is_cuda()) {
    LT_CHECK(normalize_dim(dim, x.dim()) == x.dim() - 1,
             "softmax: the CUDA kernel works along the last dimension, got dim ", dim, " of ",
             x.str());
    return cuda::softmax_last(x.detach());
  }
#endif
  if (!x.device().is_cpu()) no_kernel("softmax", x.device());
  const Lines lines = lines_along(x.shape(), normalize_dim(dim, x.dim()));
  const Tensor cx = as_compute(x.detach());
  Tensor out = Tensor::empty(x.shape(), cx.dtype());
  dispatch_floating(cx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = cx.data<T>();
    T* po = out.data<T>();
    const int64_t n = lines.length, s = lines.stride;
    for_each_line(lines, [&](int64_t start) {
      const T* xl = px + start;
      T* yl = po + start;
      T row_max = -std::numeric_limits<T>::infinity();
      for (int64_t k = 0; k < n; ++k) row_max = std::max(row_max, xl[k * s]);
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        const T e = std::exp(xl[k * s] - row_max);
        yl[k * s] = e;
        sum += e;
      }
      const T inv = static_cast<T>(1.0 / sum);
      for (int64_t k = 0; k < n; ++k) yl[k * s] *= inv;
    });
  });
  return out.to(x.dtype());
}

Tensor softmax_backward(const Tensor& grad_out, const Tensor& y, int64_t dim) {
  check_floating(y, "softmax_backward");
  check_floating(grad_out, "softmax_backward");
  const Device device = common_device({&grad_out, &y}, "softmax_backward");
  LT_CHECK(y.dim() >= 1 && grad_out.shape() == y.shape(), "softmax_backward: gradient ",
           grad_out.str(), " does not fit output ", y.str());
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) {
    LT_CHECK(normalize_dim(dim, y.dim()) == y.dim() - 1,
             "softmax_backward: the CUDA kernel works along the last dimension, got dim ", dim,
             " of ", y.str());
    return cuda::softmax_backward_last(grad_out.detach(), y.detach());
  }
#endif
  if (!device.is_cpu()) no_kernel("softmax_backward", device);
  const Lines lines = lines_along(y.shape(), normalize_dim(dim, y.dim()));
  const DType ct = compute_dtype(y.dtype());
  const Tensor cy = as_compute(y.detach()), cg = grad_out.detach().to(ct).contiguous();
  Tensor out = Tensor::empty(y.shape(), ct);
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    const T* py = cy.data<T>();
    const T* pg = cg.data<T>();
    T* po = out.data<T>();
    const int64_t n = lines.length, s = lines.stride;
    for_each_line(lines, [&](int64_t start) {
      double dot = 0;
      for (int64_t k = 0; k < n; ++k)
        dot += static_cast<double>(pg[start + k * s]) * py[start + k * s];
      const T tdot = static_cast<T>(dot);
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = start + k * s;
        po[i] = py[i] * (pg[i] - tdot);
      }
    });
  });
  return out.to(y.dtype());
}

}  // namespace lt::ops
