#include "ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/thread_pool.h"
#include "ops/common.h"
#include "ops/cpu/softmax_rows.h"
#include "ops/cuda/cross_entropy.h"

namespace lt::ops {

namespace {

struct Checked {
  std::vector<int64_t> targets;
  int64_t count = 0;
};

// The shapes and dtypes of logits and targets (no values read).
void check_target_shape(const Tensor& logits, const Tensor& targets, const char* op) {
  check_floating(logits, op);
  LT_CHECK(logits.dim() == 2, op, ": logits must be [N, V], got ", logits.str());
  LT_CHECK(targets.dtype() == DType::I32 || targets.dtype() == DType::I64, op,
           ": targets must be i32 or i64, got ", targets.str());
  LT_CHECK(targets.shape() == (Shape{logits.size(0)}), op, ": targets must be [", logits.size(0),
           "] for logits ", logits.str(), ", got ", targets.str());
}

// Targets as i64, each either ignore_index or a class in [0, V). Checked on
// the calling thread before any work, so the error names the first bad one.
Checked check_targets(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                      const char* op) {
  check_target_shape(logits, targets, op);
  const int64_t n = logits.size(0), v = logits.size(1);
  Tensor c = targets.contiguous();
  Checked out;
  out.targets.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = c.dtype() == DType::I64 ? c.data<int64_t>()[i] : c.data<int32_t>()[i];
    if (t != ignore_index) {
      LT_CHECK(t >= 0 && t < v, op, ": target ", t, " at row ", i,
               " is outside the vocabulary [0, ", v, ") and is not ignore_index (", ignore_index,
               ")");
      ++out.count;
    }
    out.targets[static_cast<size_t>(i)] = t;
  }
  return out;
}

// Row r of contiguous [N, V] `t` as T: in place when t holds T, else
// widened into `buf` (one row at a time, so bf16 logits never get a full
// f32 copy).
template <typename T>
const T* read_row(const Tensor& t, int64_t r, int64_t v, T* buf) {
  if (t.dtype() == dtype_of<T>::value) return t.data<T>() + r * v;
  const auto* src = static_cast<const char*>(t.data_ptr()) + r * v * dtype_size(t.dtype());
  convert(src, t.dtype(), buf, dtype_of<T>::value, static_cast<size_t>(v));
  return buf;
}

// Rows per parallel chunk: about 16K logits.
int64_t row_grain(int64_t v) {
  return std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(v, 1));
}

}  // namespace

CrossEntropyOutput cross_entropy(const Tensor& logits, const Tensor& targets,
                                 int64_t ignore_index) {
  Device device = common_device({&logits, &targets}, "cross_entropy");
#ifdef LT_WITH_CUDA
  // The kernels count and check the targets on the device (no read-back of
  // the targets; see ops/cuda/cross_entropy.h).
  if (device.is_cuda()) {
    check_target_shape(logits, targets, "cross_entropy");
    return cuda::cross_entropy(logits, targets, ignore_index);
  }
#endif
  if (!device.is_cpu()) no_kernel("cross_entropy", device);
  const Checked checked = check_targets(logits, targets, ignore_index, "cross_entropy");
  const int64_t N = logits.size(0), V = logits.size(1);
  const DType ct = compute_dtype(logits.dtype());
  Tensor lc = logits.contiguous();
  CrossEntropyOutput out;
  out.lse = Tensor::empty({N}, ct);
  out.count = checked.count;
  // Per-row losses are summed serially afterwards: a fixed order, so the
  // loss does not depend on the thread count.
  std::vector<double> row_loss(static_cast<size_t>(N), 0.0);
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    T* lse = out.lse.data<T>();
    parallel_for(0, N, row_grain(V), [&](int64_t lo, int64_t hi) {
      std::vector<T> buf(lc.dtype() == ct ? 0 : static_cast<size_t>(V));
      for (int64_t r = lo; r < hi; ++r) {
        const int64_t t = checked.targets[r];
        if (t == ignore_index) {
          lse[r] = T(0);
          continue;
        }
        const T* x = read_row(lc, r, V, buf.data());
        T m = -std::numeric_limits<T>::infinity();
        double s = 0;
        if constexpr (std::is_same_v<T, float>) {
          m = cpu::row_kernels().max(x, V);
          s = cpu::row_kernels().sum_exp_shifted(x, m, V);
        } else {
          for (int64_t j = 0; j < V; ++j) m = std::max(m, x[j]);
          for (int64_t j = 0; j < V; ++j) s += std::exp(x[j] - m);
        }
        const double row_lse = static_cast<double>(m) + std::log(s);
        lse[r] = static_cast<T>(row_lse);
        row_loss[r] = row_lse - static_cast<double>(x[t]);
      }
    });
  });
  double total = 0;
  for (double l : row_loss) total += l;
  const double loss = checked.count > 0 ? total / static_cast<double>(checked.count) : 0.0;
  out.loss = Tensor::scalar(loss, ct);
  return out;
}

namespace {

// The gradient into `grad` (logits' shape and dtype, contiguous), which may
// be the logits themselves: each row is read before it is written.
void cross_entropy_backward_into(const Tensor& grad_loss, const Tensor& logits,
                                 const Tensor& targets, const Tensor& lse, int64_t ignore_index,
                                 int64_t count, const Tensor& grad) {
  // grad_loss may stay on the host whatever the device (a loss scale made
  // there, as lm_head_loss does); it is one number.
  Device device = common_device({&logits, &targets, &lse}, "cross_entropy_backward");
  LT_CHECK(grad_loss.device() == device || grad_loss.device().is_cpu(),
           "cross_entropy_backward: grad_loss ", grad_loss.str(), " is on neither the host nor ",
           device.str());
  check_target_shape(logits, targets, "cross_entropy_backward");
  LT_CHECK(grad_loss.numel() == 1, "cross_entropy_backward: grad_loss must have one element, got ",
           grad_loss.str());
  const int64_t N = logits.size(0), V = logits.size(1);
  const DType ct = compute_dtype(logits.dtype());
  LT_CHECK(lse.shape() == (Shape{N}) && lse.dtype() == ct, "cross_entropy_backward: lse must be ",
           dtype_name(ct), " [", N, "], got ", lse.str());
#ifdef LT_WITH_CUDA
  // The forward checked these targets and counted them; reading them back
  // again would stall the stream for nothing.
  if (device.is_cuda()) {
    cuda::cross_entropy_backward(grad_loss, logits, targets, lse, ignore_index, count, grad);
    return;
  }
#endif
  if (!device.is_cpu()) no_kernel("cross_entropy_backward", device);
  const Checked checked = check_targets(logits, targets, ignore_index, "cross_entropy_backward");
  LT_CHECK(checked.count == count, "cross_entropy_backward: the forward counted ", count,
           " targets, these targets count ", checked.count);
  Tensor lc = logits.contiguous(), lsec = lse.contiguous();
  const double scale = count > 0 ? grad_loss.item() / static_cast<double>(count) : 0.0;
  const bool in_place = logits.dtype() == ct;
  const size_t row_bytes = static_cast<size_t>(V) * dtype_size(logits.dtype());
  dispatch_floating(ct, [&](auto tag) {
    using T = decltype(tag);
    const T* lse_p = lsec.data<T>();
    const T s = static_cast<T>(scale);
    parallel_for(0, N, row_grain(V), [&](int64_t lo, int64_t hi) {
      std::vector<T> xbuf(in_place ? 0 : static_cast<size_t>(V));
      std::vector<T> gbuf(in_place ? 0 : static_cast<size_t>(V));
      for (int64_t r = lo; r < hi; ++r) {
        auto* dst = static_cast<char*>(grad.data_ptr()) + static_cast<size_t>(r) * row_bytes;
        const int64_t t = checked.targets[r];
        if (t == ignore_index || count == 0) {
          std::memset(dst, 0, row_bytes);  // +0.0 is all-zero bits in every float format
          continue;
        }
        const T* x = read_row(lc, r, V, xbuf.data());
        T* g = in_place ? reinterpret_cast<T*>(dst) : gbuf.data();
        // softmax recomputed from the saved logsumexp: exp(x - lse).
        if constexpr (std::is_same_v<T, float>) {
          cpu::row_kernels().exp_shifted_scaled(x, lse_p[r], s, g, V);
        } else {
          for (int64_t j = 0; j < V; ++j) g[j] = std::exp(x[j] - lse_p[r]) * s;
        }
        g[t] -= s;
        if (!in_place) convert(g, ct, dst, logits.dtype(), static_cast<size_t>(V));
      }
    });
  });
}

}  // namespace

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets,
                              const Tensor& lse, int64_t ignore_index, int64_t count) {
  Tensor grad = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  cross_entropy_backward_into(grad_loss, logits, targets, lse, ignore_index, count, grad);
  return grad;
}

void cross_entropy_backward_(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets,
                             const Tensor& lse, int64_t ignore_index, int64_t count) {
  LT_CHECK(logits.is_contiguous(), "cross_entropy_backward_: the logits must be contiguous, got ",
           logits.str());
  cross_entropy_backward_into(grad_loss, logits, targets, lse, ignore_index, count, logits);
}

}  // namespace lt::ops
