#include "ops/classifier.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "ops/common.h"
#include "ops/cpu/gemm.h"
#include "ops/cuda/classifier.h"
#include "ops/cuda/gemm.h"
#include "ops/elementwise.h"
#include "ops/index_checks.h"

namespace lt::ops {

namespace {

void check_classifier_args(const Tensor& logits, int64_t vocab, const Tensor& targets,
                           const Tensor& row_loss) {
  check_floating(logits, "classifier");
  LT_CHECK(logits.dim() == 2 && logits.is_contiguous(),
           "classifier: logits must be a contiguous [R, S], got ", logits.str());
  LT_CHECK(vocab > 0 && vocab <= logits.size(1), "classifier: vocabulary ", vocab,
           " does not fit logits ", logits.str());
  LT_CHECK(targets.dtype() == DType::I32 || targets.dtype() == DType::I64,
           "classifier: targets must be i32 or i64, got ", targets.str());
  LT_CHECK(targets.shape() == Shape({logits.size(0)}), "classifier: targets ", targets.str(),
           " for logits ", logits.str());
  const DType loss_dtype = logits.dtype() == DType::F64 ? DType::F64 : DType::F32;
  LT_CHECK(row_loss.shape() == Shape({logits.size(0)}) && row_loss.dtype() == loss_dtype &&
               row_loss.is_contiguous(),
           "classifier: row_loss must be a contiguous ", dtype_name(loss_dtype), " [",
           logits.size(0), "], got ", row_loss.str());
}

template <typename T>
void classifier_cpu(const Tensor& logits, int64_t vocab, const std::vector<int64_t>& targets,
                    int64_t ignore_index, double grad_scale, const Tensor& row_loss,
                    bool write_grad) {
  const int64_t rows = logits.size(0), stride = logits.size(1);
  T* x = logits.data<T>();
  T* loss = row_loss.data<T>();
  parallel_for(0, rows, std::max<int64_t>(1, 65536 / stride), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      T* xr = x + r * stride;
      const int64_t t = targets[static_cast<size_t>(r)];
      if (t == ignore_index) {
        loss[r] = T(0);
        if (write_grad) std::fill(xr, xr + stride, T(0));
        continue;
      }
      // Max first, then the sum of exponentials below it: exact to the
      // compute type, with no rescaling as the max grows.
      double m = -INFINITY;
      for (int64_t c = 0; c < vocab; ++c) m = std::max(m, static_cast<double>(xr[c]));
      double s = 0;
      for (int64_t c = 0; c < vocab; ++c) s += std::exp(static_cast<double>(xr[c]) - m);
      const double lse = m + std::log(s);
      loss[r] = static_cast<T>(lse - static_cast<double>(xr[t]));
      if (!write_grad) continue;
      for (int64_t c = 0; c < stride; ++c) {
        const double p = c < vocab ? std::exp(static_cast<double>(xr[c]) - lse) : 0.0;
        xr[c] = static_cast<T>((p - (c == t ? 1.0 : 0.0)) * grad_scale);
      }
    }
  });
}

// c = a @ b, or c += a @ b when `accumulate`, on c's device.
void product(const Tensor& a, const Tensor& b, const Tensor& c, bool accumulate) {
#ifdef LT_WITH_CUDA
  if (c.device().is_cuda()) return cuda::gemm(a, b, c, accumulate);
#endif
  cpu::gemm(a, b, c, accumulate);
}

}  // namespace

void classifier_(const Tensor& logits, int64_t vocab, const Tensor& targets, int64_t ignore_index,
                 double grad_scale, const Tensor& row_loss, bool write_grad) {
  const Device device = common_device({&logits, &targets, &row_loss}, "classifier");
  check_classifier_args(logits, vocab, targets, row_loss);
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) {
    cuda::classifier(logits, vocab, targets.contiguous(), ignore_index,
                     static_cast<float>(grad_scale), row_loss, write_grad);
    return;
  }
#endif
  if (!device.is_cpu()) no_kernel("classifier", device);
  // Every target is checked before any work, so the error names the first.
  const Tensor tc = targets.to(DType::I64).contiguous();
  std::vector<int64_t> t(tc.data<int64_t>(), tc.data<int64_t>() + tc.numel());
  for (size_t r = 0; r < t.size(); ++r) {
    LT_CHECK(t[r] == ignore_index || (t[r] >= 0 && t[r] < vocab), "classifier: target ", t[r],
             " at row ", r, " is outside the vocabulary [0, ", vocab, ") and is not ignore_index (",
             ignore_index, ")");
  }
  LT_CHECK(logits.dtype() == DType::F32 || logits.dtype() == DType::F64,
           "classifier: the CPU computes f32 or f64 logits, got ", logits.str());
  dispatch_floating(logits.dtype(), [&](auto tag) {
    classifier_cpu<decltype(tag)>(logits, vocab, t, ignore_index, grad_scale, row_loss, write_grad);
  });
}

bool fused_lm_head_enabled() {
  const char* v = std::getenv("LT_LM_HEAD");
  return v == nullptr || std::string_view(v) != "unfused";
}

LmHeadLossGrads lm_head_loss_grads(const Tensor& hidden, const Tensor& weight,
                                   const Tensor& targets, double loss_denominator,
                                   int64_t ignore_index, int64_t chunk_logits, int64_t pad_to) {
  const Device device = common_device({&hidden, &weight, &targets}, "lm_head_loss_grads");
  LT_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1) &&
               hidden.dtype() == weight.dtype(),
           "lm_head_loss_grads: hidden ", hidden.str(), " and weight ", weight.str(),
           " do not match");
  LT_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0), "lm_head_loss_grads: targets ",
           targets.str(), " for hidden ", hidden.str());
  LT_CHECK(loss_denominator > 0 && chunk_logits > 0 && pad_to > 0,
           "lm_head_loss_grads: loss_denominator, chunk_logits and pad_to must be positive");
  const DType dtype = hidden.dtype();
  const int64_t n = hidden.size(0), cols = hidden.size(1), vocab = weight.size(0);
  const int64_t padded = (vocab + pad_to - 1) / pad_to * pad_to;
  const Tensor h = hidden.detach().contiguous();
  // Zero rows past the vocabulary give zero logits there, which the
  // classifier masks and whose gradient it writes as 0.
  Tensor wp = weight.detach().contiguous();
  if (padded != vocab) {
    wp = Tensor::zeros({padded, cols}, dtype, device);
    wp.slice(0, 0, vocab).copy_(weight);
  }
  const Tensor wt = cpu::transpose_last(wp);
  const int64_t step = std::max<int64_t>(1, chunk_logits / padded);
  const DType loss_dtype = dtype == DType::F64 ? DType::F64 : DType::F32;
  Tensor row_loss = Tensor::empty({n}, loss_dtype, device);
  LmHeadLossGrads out;
  out.hidden = Tensor::empty({n, cols}, dtype, device);
  Tensor dwp = Tensor::zeros({padded, cols}, dtype, device);
  // One chunk buffer for every chunk: they run in order on one stream.
  Tensor buffer = Tensor::empty({std::min(step, n), padded}, dtype, device);
  const double grad_scale = 1.0 / loss_denominator;
  for (int64_t b = 0; b < n; b += step) {
    const int64_t e = std::min(n, b + step);
    const Tensor hc = h.slice(0, b, e), logits = buffer.slice(0, 0, e - b);
    product(hc, wt, logits, false);
    classifier_(logits, vocab, targets.slice(0, b, e), ignore_index, grad_scale,
                row_loss.slice(0, b, e), true);
    product(logits, wp, out.hidden.slice(0, b, e), false);
    product(cpu::transpose_last(logits), hc, dwp, true);
  }
  out.weight = padded == vocab ? dwp : dwp.slice(0, 0, vocab);
  out.loss = n == 0 ? Tensor::zeros({}, loss_dtype, device)
                    : scale(sum_all(row_loss), 1.0 / loss_denominator);
  if (device.is_cuda() && !index_checks_deferred()) check_index_errors(device);
  return out;
}

}  // namespace lt::ops
