// Softmax cross-entropy on the GPU: one block per row of logits. The
// forward makes one pass over the row for its max and sum of exponentials
// (rescaled as the max grows) in f32, whatever the logits' dtype; the
// backward recomputes the softmax from the saved logsumexp and writes
// (softmax - onehot) * scale in the logits' dtype. Neither materializes an
// f32 copy of the logits.
#include "ops/cuda/cross_entropy.h"
#include "ops/cuda/index_check.cuh"
#include "ops/cuda/kernel_common.cuh"

namespace lt::ops::cuda {

namespace {

__device__ __forceinline__ int64_t target_at(const void* targets, bool wide, int64_t r) {
  return wide ? static_cast<const int64_t*>(targets)[r] : static_cast<const int32_t*>(targets)[r];
}

template <typename T, bool kPacked>
__global__ void ce_forward_rows(const T* logits, const void* targets, bool wide, int64_t vocab,
                                int64_t ignore_index, IndexError* bad, float* lse,
                                float* row_loss) {
  __shared__ float scratch_m[32], scratch_s[32];
  const int64_t r = blockIdx.x;
  const int64_t t = target_at(targets, wide, r);
  if (t == ignore_index) {  // the same for the whole block: no barrier is skipped by some only
    if (threadIdx.x == 0) lse[r] = row_loss[r] = 0.0f;
    return;
  }
  const T* x = logits + r * vocab;
  MaxSum acc;
  row_visit<T, kPacked, 1>({x}, vocab, [&](const float(&v)[1]) { add_to(acc, v[0]); });
  acc = block_max_sum(acc, scratch_m, scratch_s);
  if (threadIdx.x == 0) {
    const float l = acc.m + logf(acc.s);
    lse[r] = l;
    const bool ok = t >= 0 && t < vocab;
    if (!ok) record_bad_index(bad, kIndexOpCrossEntropy, t, r, vocab, ignore_index);
    row_loss[r] = ok ? l - to_f32(x[t]) : NAN;
  }
}

// What the host reads back from one forward, in one copy: the count of
// targets (the caller weighs chunks by it) and the device's index-error
// record as it stood after the forward (op kIndexOpNone when no kernel on
// the stream so far found a bad index).
struct ForwardSummary {
  IndexError bad;
  int64_t count;
};

// count = the targets that are not ignore_index, loss = sum(row_loss) /
// count, both reduced by one block in a fixed order; then the summary.
// `record` is read after the row kernel on the same stream wrote it.
__global__ void ce_mean(const float* row_loss, const void* targets, bool wide, int64_t rows,
                        int64_t ignore_index, const IndexError* record, float* loss,
                        ForwardSummary* summary) {
  __shared__ float scratch[32];
  __shared__ long long count_scratch[32];
  float s = 0.0f;
  long long count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    s += row_loss[r];
    count += target_at(targets, wide, r) != ignore_index;
  }
  s = block_sum(s, scratch);
  count = block_reduce(count, 0LL, count_scratch, SumOp{});
  if (threadIdx.x == 0) {
    loss[0] = count > 0 ? static_cast<float>(s / static_cast<double>(count)) : 0.0f;
    summary->count = count;
    summary->bad = *record;
  }
}

// d loss / d logits scale: grad_loss / count, read from the device when
// grad_loss lives there (kind 0 f32, 1 bf16, 2 f64), else `host_scale`.
struct Scale {
  const void* grad_loss;
  int kind;
  double count;
  float host_scale;
  __device__ float value() const {
    if (!grad_loss) return host_scale;
    double g = kind == 0   ? static_cast<const float*>(grad_loss)[0]
               : kind == 1 ? __bfloat162float(static_cast<const bf16*>(grad_loss)[0])
                           : static_cast<const double*>(grad_loss)[0];
    return static_cast<float>(g / count);
  }
};

template <typename T, bool kPacked>
__global__ void ce_backward_rows(const T* logits, const void* targets, bool wide, int64_t vocab,
                                 int64_t ignore_index, const float* lse, Scale scale, T* grad) {
  const int64_t r = blockIdx.x;
  const int64_t t = target_at(targets, wide, r);
  const T* x = logits + r * vocab;
  T* g = grad + r * vocab;
  if (t == ignore_index || scale.count == 0) {
    row_write<T, kPacked, 1>({x}, g, vocab, [](const float(&)[1]) { return 0.0f; });
    return;
  }
  const bool has_target = t >= 0 && t < vocab;
  // g may be x (the gradient written over the logits): the target's logit
  // is read before any thread writes the row.
  __shared__ float target_logit;
  if (threadIdx.x == 0 && has_target) target_logit = to_f32(x[t]);
  __syncthreads();
  const float l = lse[r], s = scale.value();
  row_write<T, kPacked, 1>({x}, g, vocab, [&](const float(&v)[1]) { return __expf(v[0] - l) * s; });
  // The one-hot term, by one thread once every element of the row is written.
  __syncthreads();
  if (threadIdx.x == 0 && has_target) g[t] = from_f32<T>(__expf(target_logit - l) * s - s);
}

unsigned rows_of(const Tensor& logits) {
  LT_CHECK(logits.size(0) <= 0x7fffffff, "cross_entropy: ", logits.size(0),
           " rows exceed the grid");
  return static_cast<unsigned>(logits.size(0));
}

}  // namespace

CrossEntropyOutput cross_entropy(const Tensor& logits_in, const Tensor& targets_in,
                                 int64_t ignore_index) {
  check_kernel_dtype(logits_in, "cross_entropy");
  const Tensor logits = dense(logits_in), targets = dense(targets_in);
  const Device device = logits.device();
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  CrossEntropyOutput out;
  out.lse = Tensor::empty({rows}, DType::F32, device);
  out.loss = Tensor::empty({}, DType::F32, device);
  Tensor row_loss = Tensor::empty({rows}, DType::F32, device);
  Tensor summary = Tensor::empty({static_cast<int64_t>(sizeof(ForwardSummary))}, DType::U8, device);
  IndexError* bad = index_error_record(device);
  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = stream_for(device);
  const bool wide = targets.dtype() == DType::I64;
  if (rows > 0) {
    dispatch_kernel_dtype(logits.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const auto* px = static_cast<const T*>(logits.data_ptr());
      const int threads = row_threads(vocab, Pack<T>::kSize);
      auto* plse = static_cast<float*>(out.lse.data_ptr());
      auto* ploss = static_cast<float*>(row_loss.data_ptr());
      if (vocab % Pack<T>::kSize == 0 && aligned16(px)) {
        ce_forward_rows<T, true><<<rows_of(logits), threads, 0, stream>>>(
            px, targets.data_ptr(), wide, vocab, ignore_index, bad, plse, ploss);
      } else {
        ce_forward_rows<T, false><<<rows_of(logits), threads, 0, stream>>>(
            px, targets.data_ptr(), wide, vocab, ignore_index, bad, plse, ploss);
      }
      LT_CUDA_CHECK(cudaGetLastError());
    });
  }
  auto* psummary = static_cast<ForwardSummary*>(summary.data_ptr());
  ce_mean<<<1, 1024, 0, stream>>>(static_cast<const float*>(row_loss.data_ptr()),
                                  targets.data_ptr(), wide, rows, ignore_index, bad,
                                  static_cast<float*>(out.loss.data_ptr()), psummary);
  LT_CUDA_CHECK(cudaGetLastError());
  // The count is needed on the host (the caller weighs chunks by it), so
  // this op waits for its kernels anyway: the bad-target check comes with
  // that one wait (and reports a bad id an earlier deferred embedding
  // found), the record and the count in one copy.
  ForwardSummary host{};
  LT_CUDA_CHECK(cudaMemcpyAsync(&host, psummary, sizeof(host), cudaMemcpyDeviceToHost, stream));
  LT_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (host.bad.op != kIndexOpNone) throw_index_error(device, host.bad);
  out.count = host.count;
  return out;
}

void cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits_in,
                            const Tensor& targets_in, const Tensor& lse_in, int64_t ignore_index,
                            int64_t count, const Tensor& grad) {
  check_kernel_dtype(logits_in, "cross_entropy_backward");
  const Tensor logits = dense(logits_in), targets = dense(targets_in), lse = dense(lse_in);
  const Device device = logits.device();
  LT_CHECK(grad.is_contiguous() && grad.shape() == logits.shape() &&
               grad.dtype() == logits.dtype() && grad.device() == device,
           "cross_entropy_backward: gradient ", grad.str(), " for logits ", logits.str());
  if (grad.numel() == 0) return;
  Scale scale{nullptr, 0, static_cast<double>(count), 0.0f};
  if (grad_loss.device().is_cpu()) {
    scale.host_scale =
        count > 0 ? static_cast<float>(grad_loss.item() / static_cast<double>(count)) : 0.0f;
  } else {
    const DType gd = grad_loss.dtype();
    LT_CHECK(gd == DType::F32 || gd == DType::BF16 || gd == DType::F64,
             "cross_entropy_backward: grad_loss must be f32, bf16 or f64, got ", grad_loss.str());
    scale.grad_loss = grad_loss.data_ptr();
    scale.kind = gd == DType::F32 ? 0 : gd == DType::BF16 ? 1 : 2;
  }
  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = stream_for(device);
  const int64_t vocab = logits.size(1);
  const bool wide = targets.dtype() == DType::I64;
  dispatch_kernel_dtype(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto* px = static_cast<const T*>(logits.data_ptr());
    auto* pg = static_cast<T*>(grad.data_ptr());
    const auto* plse = static_cast<const float*>(lse.data_ptr());
    const int threads = row_threads(vocab, Pack<T>::kSize);
    if (vocab % Pack<T>::kSize == 0 && aligned16(px) && aligned16(pg)) {
      ce_backward_rows<T, true><<<rows_of(logits), threads, 0, stream>>>(
          px, targets.data_ptr(), wide, vocab, ignore_index, plse, scale, pg);
    } else {
      ce_backward_rows<T, false><<<rows_of(logits), threads, 0, stream>>>(
          px, targets.data_ptr(), wide, vocab, ignore_index, plse, scale, pg);
    }
    LT_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace lt::ops::cuda
