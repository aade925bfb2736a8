#include "ops/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "ops/common.h"
#include "ops/cuda/norm.h"

namespace lt::ops {

namespace {

// n elements of contiguous `t` from element `begin`, as T: in place when t
// holds T, else widened into `buf`. Row-wise widening keeps half-precision
// inputs from needing a full f32 copy.
template <typename T>
const T* read_span(const Tensor& t, int64_t begin, int64_t n, T* buf) {
  if (t.dtype() == dtype_of<T>::value) return t.data<T>() + begin;
  const auto* src = static_cast<const char*>(t.data_ptr()) + begin * dtype_size(t.dtype());
  convert(src, t.dtype(), buf, dtype_of<T>::value, static_cast<size_t>(n));
  return buf;
}

// Stores n values into contiguous `t` from element `begin`, rounding to t's dtype.
template <typename T>
void write_span(const Tensor& t, int64_t begin, int64_t n, const T* src) {
  auto* dst = static_cast<char*>(t.data_ptr()) + begin * dtype_size(t.dtype());
  convert(src, dtype_of<T>::value, dst, t.dtype(), static_cast<size_t>(n));
}

struct Rows {
  int64_t rows = 0;
  int64_t cols = 0;
  Shape stat_shape;  // x's shape without the last dim
};

Rows check_rows(const Tensor& x, const char* op) {
  check_floating(x, op);
  LT_CHECK(x.dim() >= 1, op, ": x needs at least one dimension, got ", x.str());
  Rows r;
  r.cols = x.size(-1);
  LT_CHECK(r.cols > 0, op, ": the normalized dimension of ", x.str(), " is empty");
  r.rows = x.numel() / r.cols;
  r.stat_shape = Shape(x.shape().begin(), x.shape().end() - 1);
  return r;
}

void check_param(const Tensor& p, const Tensor& x, const char* op, const char* what) {
  if (!p.defined()) return;
  LT_CHECK(p.dim() == 1 && p.size(0) == x.size(-1), op, ": ", what, " must be [", x.size(-1),
           "] for x ", x.str(), ", got ", p.str());
  LT_CHECK(p.dtype() == x.dtype(), op, ": ", what, " is ", dtype_name(p.dtype()), " but x is ",
           dtype_name(x.dtype()));
}

// The parameter as a contiguous compute-type vector; `fill` when undefined.
template <typename T>
std::vector<T> param_values(const Tensor& p, int64_t cols, T fill) {
  if (!p.defined()) return std::vector<T>(static_cast<size_t>(cols), fill);
  Tensor c = p.contiguous().to(dtype_of<T>::value);
  return std::vector<T>(c.data<T>(), c.data<T>() + cols);
}

// Rows per parallel chunk: about 16K elements, enough to hide scheduling.
int64_t row_grain(int64_t cols) {
  return std::max<int64_t>(1, (1 << 14) / cols);
}

// Column-blocked sums over all rows, for the weight and bias gradients:
// each thread owns a block of columns, so the sums need no atomics and
// their order does not depend on the thread count. `term(r, c0, n, out,
// scratch_a, scratch_b)` writes row r's contribution to columns
// [c0, c0 + n) into out; the scratch buffers (n each) are for read_span.
template <typename T, typename Term>
std::vector<double> column_sums(int64_t rows, int64_t cols, Term term) {
  std::vector<double> sums(static_cast<size_t>(cols), 0.0);
  // 64 columns = 256 bytes of f32 per row read: long enough runs to stream.
  parallel_for(0, cols, 64, [&](int64_t lo, int64_t hi) {
    const auto n = static_cast<size_t>(hi - lo);
    std::vector<T> out(n), a(n), b(n);
    for (int64_t r = 0; r < rows; ++r) {
      term(r, lo, hi - lo, out.data(), a.data(), b.data());
      for (int64_t c = lo; c < hi; ++c) sums[c] += out[c - lo];
    }
  });
  return sums;
}

Tensor tensor_from_sums(const std::vector<double>& sums, DType dtype) {
  return Tensor::from_doubles(sums, {static_cast<int64_t>(sums.size())}, dtype);
}

}  // namespace

// ---------------------------------------------------------------- RMSNorm

RmsNormOutput rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  Device device = common_device({&x, &weight}, "rms_norm");
  const Rows shape = check_rows(x, "rms_norm");
  LT_CHECK(weight.defined(), "rms_norm: weight is undefined");
  check_param(weight, x, "rms_norm", "weight");
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) return cuda::rms_norm(x, weight, eps);
#endif
  if (!device.is_cpu()) no_kernel("rms_norm", device);
  const DType ct = compute_dtype(x.dtype());
  const bool half = x.dtype() != ct;
  Tensor xc = x.contiguous();
  RmsNormOutput out{Tensor::empty(x.shape(), x.dtype()), Tensor::empty(shape.stat_shape, ct)};
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = shape.cols;
    const std::vector<T> w = param_values<T>(weight, C, T(1));
    T* rstd = out.rstd.data<T>();
    parallel_for(0, shape.rows, row_grain(C), [&](int64_t lo, int64_t hi) {
      std::vector<T> xbuf(static_cast<size_t>(C)), ybuf(static_cast<size_t>(C));
      std::vector<uint16_t> hbuf(half ? static_cast<size_t>(C) : 0);
      for (int64_t r = lo; r < hi; ++r) {
        const T* xr = read_span(xc, r * C, C, xbuf.data());
        double ss = 0;
        for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(xr[c]) * xr[c];
        // Hugging Face: variance in f32, then rsqrt(variance + eps) in f32.
        const T var = static_cast<T>(ss / static_cast<double>(C));
        const T rs = T(1) / std::sqrt(var + static_cast<T>(eps));
        rstd[r] = rs;
        T* y = ybuf.data();
        for (int64_t c = 0; c < C; ++c) y[c] = xr[c] * rs;
        if (half) {
          // LlamaRMSNorm casts the normalized x to the input dtype before
          // the weight multiply; round through it to match bit for bit.
          convert(y, ct, hbuf.data(), x.dtype(), static_cast<size_t>(C));
          convert(hbuf.data(), x.dtype(), y, ct, static_cast<size_t>(C));
        }
        for (int64_t c = 0; c < C; ++c) y[c] *= w[c];
        write_span(out.y, r * C, C, y);
      }
    });
  });
  return out;
}

RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                               const Tensor& rstd, bool need_dx, bool need_dweight) {
  Device device = common_device({&dy, &x, &weight, &rstd}, "rms_norm_backward");
  const Rows shape = check_rows(x, "rms_norm_backward");
  check_param(weight, x, "rms_norm_backward", "weight");
  LT_CHECK(dy.shape() == x.shape(), "rms_norm_backward: gradient ", dy.str(), " for x ", x.str());
  const DType ct = compute_dtype(x.dtype());
  LT_CHECK(rstd.shape() == shape.stat_shape && rstd.dtype() == ct,
           "rms_norm_backward: rstd must be ", dtype_name(ct), " ", shape_str(shape.stat_shape),
           ", got ", rstd.str());
  LT_CHECK(!need_dweight || weight.defined(), "rms_norm_backward: dweight without a weight");
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) return cuda::rms_norm_backward(dy, x, weight, rstd, need_dx, need_dweight);
#endif
  if (!device.is_cpu()) no_kernel("rms_norm_backward", device);
  Tensor xc = x.contiguous(), gc = dy.contiguous(), rc = rstd.contiguous();
  RmsNormGrads grads;
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = shape.cols;
    const T* rs = rc.data<T>();
    if (need_dx) {
      grads.dx = Tensor::empty(x.shape(), x.dtype());
      const std::vector<T> w = param_values<T>(weight, C, T(1));
      // y = w * x * r with r = (mean(x^2) + eps)^(-1/2), so with n = x r and
      // dn = dy * w:  dx = r * (dn - n * mean(dn * n)).
      parallel_for(0, shape.rows, row_grain(C), [&](int64_t lo, int64_t hi) {
        std::vector<T> xbuf(static_cast<size_t>(C)), gbuf(static_cast<size_t>(C));
        std::vector<T> dn(static_cast<size_t>(C));
        for (int64_t r = lo; r < hi; ++r) {
          const T* xr = read_span(xc, r * C, C, xbuf.data());
          const T* gr = read_span(gc, r * C, C, gbuf.data());
          double dot = 0;
          for (int64_t c = 0; c < C; ++c) {
            dn[c] = gr[c] * w[c];
            dot += static_cast<double>(dn[c]) * (xr[c] * rs[r]);
          }
          const T m = static_cast<T>(dot / static_cast<double>(C));
          for (int64_t c = 0; c < C; ++c) dn[c] = rs[r] * (dn[c] - xr[c] * rs[r] * m);
          write_span(grads.dx, r * C, C, dn.data());
        }
      });
    }
    if (need_dweight) {
      // dweight = sum over rows of dy * n.
      auto sums = column_sums<T>(shape.rows, C,
                                 [&](int64_t r, int64_t c0, int64_t n, T* out, T* sa, T* sb) {
                                   const T* xr = read_span(xc, r * C + c0, n, sa);
                                   const T* gr = read_span(gc, r * C + c0, n, sb);
                                   for (int64_t c = 0; c < n; ++c) out[c] = gr[c] * xr[c] * rs[r];
                                 });
      grads.dweight = tensor_from_sums(sums, weight.dtype());
    }
  });
  return grads;
}

// ---------------------------------------------------------------- LayerNorm

LayerNormOutput layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  Device device = common_device({&x, &weight, &bias}, "layer_norm");
  const Rows shape = check_rows(x, "layer_norm");
  check_param(weight, x, "layer_norm", "weight");
  check_param(bias, x, "layer_norm", "bias");
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) return cuda::layer_norm(x, weight, bias, eps);
#endif
  if (!device.is_cpu()) no_kernel("layer_norm", device);
  const DType ct = compute_dtype(x.dtype());
  Tensor xc = x.contiguous();
  LayerNormOutput out{Tensor::empty(x.shape(), x.dtype()), Tensor::empty(shape.stat_shape, ct),
                      Tensor::empty(shape.stat_shape, ct)};
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = shape.cols;
    const std::vector<T> w = param_values<T>(weight, C, T(1));
    const std::vector<T> b = param_values<T>(bias, C, T(0));
    T* mean = out.mean.data<T>();
    T* rstd = out.rstd.data<T>();
    parallel_for(0, shape.rows, row_grain(C), [&](int64_t lo, int64_t hi) {
      std::vector<T> xbuf(static_cast<size_t>(C)), ybuf(static_cast<size_t>(C));
      for (int64_t r = lo; r < hi; ++r) {
        const T* xr = read_span(xc, r * C, C, xbuf.data());
        // Two passes (mean, then squared deviations) avoid the cancellation
        // of E[x^2] - E[x]^2 when |mean| >> std.
        double s = 0;
        for (int64_t c = 0; c < C; ++c) s += xr[c];
        const double mu = s / static_cast<double>(C);
        double ss = 0;
        for (int64_t c = 0; c < C; ++c) ss += (xr[c] - mu) * (xr[c] - mu);
        const T m = static_cast<T>(mu);
        const T var = static_cast<T>(ss / static_cast<double>(C));
        const T rs = T(1) / std::sqrt(var + static_cast<T>(eps));
        mean[r] = m;
        rstd[r] = rs;
        for (int64_t c = 0; c < C; ++c) ybuf[c] = (xr[c] - m) * rs * w[c] + b[c];
        write_span(out.y, r * C, C, ybuf.data());
      }
    });
  });
  return out;
}

LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& rstd, bool need_dx,
                                   bool need_dweight, bool need_dbias) {
  Device device = common_device({&dy, &x, &weight, &mean, &rstd}, "layer_norm_backward");
  const Rows shape = check_rows(x, "layer_norm_backward");
  check_param(weight, x, "layer_norm_backward", "weight");
  LT_CHECK(dy.shape() == x.shape(), "layer_norm_backward: gradient ", dy.str(), " for x ", x.str());
  const DType ct = compute_dtype(x.dtype());
  for (const Tensor* s : {&mean, &rstd}) {
    LT_CHECK(s->shape() == shape.stat_shape && s->dtype() == ct,
             "layer_norm_backward: statistics must be ", dtype_name(ct), " ",
             shape_str(shape.stat_shape), ", got ", s->str());
  }
  LT_CHECK(!need_dweight || weight.defined(), "layer_norm_backward: dweight without a weight");
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) {
    return cuda::layer_norm_backward(dy, x, weight, mean, rstd, need_dx, need_dweight, need_dbias);
  }
#endif
  if (!device.is_cpu()) no_kernel("layer_norm_backward", device);
  Tensor xc = x.contiguous(), gc = dy.contiguous(), mc = mean.contiguous(), rc = rstd.contiguous();
  LayerNormGrads grads;
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    const int64_t C = shape.cols;
    const T* mu = mc.data<T>();
    const T* rs = rc.data<T>();
    if (need_dx) {
      grads.dx = Tensor::empty(x.shape(), x.dtype());
      const std::vector<T> w = param_values<T>(weight, C, T(1));
      // With n = (x - mean) r and dn = dy * w:
      //   dx = r * (dn - mean(dn) - n * mean(dn * n)).
      parallel_for(0, shape.rows, row_grain(C), [&](int64_t lo, int64_t hi) {
        std::vector<T> xbuf(static_cast<size_t>(C)), gbuf(static_cast<size_t>(C));
        std::vector<T> dn(static_cast<size_t>(C));
        for (int64_t r = lo; r < hi; ++r) {
          const T* xr = read_span(xc, r * C, C, xbuf.data());
          const T* gr = read_span(gc, r * C, C, gbuf.data());
          double sum_dn = 0, sum_dnn = 0;
          for (int64_t c = 0; c < C; ++c) {
            dn[c] = gr[c] * w[c];
            sum_dn += dn[c];
            sum_dnn += static_cast<double>(dn[c]) * ((xr[c] - mu[r]) * rs[r]);
          }
          const T m1 = static_cast<T>(sum_dn / static_cast<double>(C));
          const T m2 = static_cast<T>(sum_dnn / static_cast<double>(C));
          for (int64_t c = 0; c < C; ++c) {
            dn[c] = rs[r] * (dn[c] - m1 - (xr[c] - mu[r]) * rs[r] * m2);
          }
          write_span(grads.dx, r * C, C, dn.data());
        }
      });
    }
    if (need_dweight) {
      auto sums = column_sums<T>(shape.rows, C,
                                 [&](int64_t r, int64_t c0, int64_t n, T* out, T* sa, T* sb) {
                                   const T* xr = read_span(xc, r * C + c0, n, sa);
                                   const T* gr = read_span(gc, r * C + c0, n, sb);
                                   for (int64_t c = 0; c < n; ++c)
                                     out[c] = gr[c] * (xr[c] - mu[r]) * rs[r];
                                 });
      grads.dweight = tensor_from_sums(sums, weight.dtype());
    }
    if (need_dbias) {
      auto sums =
          column_sums<T>(shape.rows, C, [&](int64_t r, int64_t c0, int64_t n, T* out, T* sa, T*) {
            const T* gr = read_span(gc, r * C + c0, n, sa);
            std::copy(gr, gr + n, out);
          });
      grads.dbias = tensor_from_sums(sums, x.dtype());
    }
  });
  return grads;
}

}  // namespace lt::ops
