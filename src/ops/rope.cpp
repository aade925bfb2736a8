#include "ops/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/thread_pool.h"
#include "ops/common.h"
#include "ops/cuda/rope.h"

namespace lt::ops {

std::vector<double> rope_inv_freq(int64_t head_dim, double theta) {
  LT_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim must be positive and even, got ",
           head_dim);
  LT_CHECK(theta > 0, "rope: theta must be positive, got ", theta);
  std::vector<double> inv_freq(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    inv_freq[i] = std::pow(theta, -static_cast<double>(2 * i) / static_cast<double>(head_dim));
  }
  return inv_freq;
}

std::vector<double> rope_llama3_scaling(std::vector<double> inv_freq, double factor,
                                        double low_freq_factor, double high_freq_factor,
                                        int64_t original_max_positions) {
  LT_CHECK(factor > 0, "rope llama3 scaling: factor must be positive, got ", factor);
  LT_CHECK(low_freq_factor > 0 && high_freq_factor > low_freq_factor,
           "rope llama3 scaling: need 0 < low_freq_factor < high_freq_factor, got ",
           low_freq_factor, " and ", high_freq_factor);
  LT_CHECK(original_max_positions > 0,
           "rope llama3 scaling: original_max_position_embeddings must be positive, got ",
           original_max_positions);
  const double old_context = static_cast<double>(original_max_positions);
  const double low_freq_wavelen = old_context / low_freq_factor;
  const double high_freq_wavelen = old_context / high_freq_factor;
  for (double& f : inv_freq) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < high_freq_wavelen) continue;  // high frequency: unchanged
    if (wavelen > low_freq_wavelen) {           // low frequency: interpolated by `factor`
      f /= factor;
      continue;
    }
    // In between (both bounds inclusive, as in transformers): blend.
    const double smooth =
        (old_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
    f = (1 - smooth) * f / factor + smooth * f;
  }
  return inv_freq;
}

RopeCosSin rope_cos_sin(const std::vector<double>& inv_freq, int64_t max_positions) {
  LT_CHECK(max_positions >= 0, "rope: negative max_positions ", max_positions);
  const auto half = static_cast<int64_t>(inv_freq.size());
  RopeCosSin t{Tensor::empty({max_positions, half}, DType::F64),
               Tensor::empty({max_positions, half}, DType::F64)};
  double* c = t.cos.data<double>();
  double* s = t.sin.data<double>();
  parallel_for(0, max_positions, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) * inv_freq[i];
        c[p * half + i] = std::cos(angle);
        s[p * half + i] = std::sin(angle);
      }
    }
  });
  return t;
}

namespace {

// Position of token (b, t), checked against the table.
struct Positions {
  const Tensor* ids = nullptr;  // undefined: position t
  int64_t batch_stride = 0;     // 0 for [T], T for [B, T]

  int64_t at(int64_t b, int64_t t) const {
    if (!ids->defined()) return t;
    const int64_t k = b * batch_stride + t;
    return ids->dtype() == DType::I64 ? ids->data<int64_t>()[k] : ids->data<int32_t>()[k];
  }
};

// y = rotation of x by sign * angle; sign -1 is the backward.
Tensor rotate(const char* op, const Tensor& x, const Tensor& cos, const Tensor& sin,
              const Tensor& positions, double sign) {
  Device device = common_device({&x, &cos, &sin, &positions}, op);
  check_floating(x, op);
  check_floating(cos, op);
  check_floating(sin, op);
  LT_CHECK(x.dim() == 4, op, ": x must be [B, T, H, D], got ", x.str());
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3);
  LT_CHECK(D % 2 == 0, op, ": head dim ", D, " of ", x.str(), " is odd");
  const int64_t half = D / 2;
  LT_CHECK(cos.dim() == 2 && cos.size(1) == half && sin.shape() == cos.shape(), op,
           ": cos/sin tables must both be [P, ", half, "] for head dim ", D, ", got ", cos.str(),
           " and ", sin.str());
  const int64_t P = cos.size(0);
  Tensor pos;
  Positions where;
  if (positions.defined()) {
    LT_CHECK(positions.dtype() == DType::I32 || positions.dtype() == DType::I64, op,
             ": positions must be i32 or i64, got ", positions.str());
    LT_CHECK(positions.shape() == (Shape{T}) || positions.shape() == (Shape{B, T}), op,
             ": positions must be [T] or [B, T] = [", B, ", ", T, "], got ", positions.str());
    // Read on the host to check them (a copy back when they live on a GPU).
    pos = positions.to(Device::cpu()).contiguous();
    where.batch_stride = positions.dim() == 2 ? T : 0;
  }
  where.ids = &pos;
  // Checked up front so that a bad position fails before any work starts.
  for (int64_t b = 0; b < (pos.defined() && pos.dim() == 2 ? B : 1); ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const int64_t p = where.at(b, t);
      LT_CHECK(p >= 0 && p < P, op, ": position ", p, " (batch ", b, ", token ", t,
               ") is outside the rope table [0, ", P, ")");
    }
  }
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) return cuda::rotary(x, cos, sin, positions, sign);
#endif
  if (!device.is_cpu()) no_kernel(op, device);
  Tensor xc = as_compute(x);
  // The tables are f64 (make_rope_table); only the rows used are read.
  Tensor cd = cos.contiguous().to(DType::F64), sd = sin.contiguous().to(DType::F64);
  Tensor out = Tensor::empty(x.shape(), xc.dtype());
  dispatch_floating(xc.dtype(), [&](auto tag) {
    using V = decltype(tag);
    const V* xp = xc.data<V>();
    V* yp = out.data<V>();
    const double* cp = cd.data<double>();
    const double* sp = sd.data<double>();
    parallel_for(0, B * T, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(H * D, 1)),
                 [&](int64_t lo, int64_t hi) {
                   std::vector<V> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
                   for (int64_t bt = lo; bt < hi; ++bt) {
                     const int64_t p = where.at(bt / T, bt % T);
                     for (int64_t i = 0; i < half; ++i) {
                       c[i] = static_cast<V>(cp[p * half + i]);
                       s[i] = static_cast<V>(sign * sp[p * half + i]);
                     }
                     for (int64_t h = 0; h < H; ++h) {
                       const V* xr = xp + (bt * H + h) * D;
                       V* yr = yp + (bt * H + h) * D;
                       for (int64_t i = 0; i < half; ++i) {
                         const V a = xr[i], b = xr[i + half];
                         yr[i] = a * c[i] - b * s[i];
                         yr[i + half] = b * c[i] + a * s[i];
                       }
                     }
                   }
                 });
  });
  return out.to(x.dtype());
}

}  // namespace

Tensor rotary(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions) {
  return rotate("rotary", x, cos, sin, positions, 1.0);
}

Tensor rotary_backward(const Tensor& grad_y, const Tensor& cos, const Tensor& sin,
                       const Tensor& positions) {
  return rotate("rotary_backward", grad_y, cos, sin, positions, -1.0);
}

}  // namespace lt::ops
