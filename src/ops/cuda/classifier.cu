// The fused classifier on the GPU (ops/classifier.h): one block per row of
// logits. Pass 1 reads the row once for its max and sum of exponentials
// (rescaled as the max grows, in f32); pass 2 reads it again, mostly from
// L2 (a 50k-column bf16 row is 100 KB, and the ~260 rows resident at once
// fit the H200's 50 MB L2), and writes the gradient over it. The loss of
// the row comes out of the same launch, so the logits are read twice and
// written once in all, and no f32 copy of them ever exists.
#include "ops/cuda/classifier.h"
#include "ops/cuda/index_check.cuh"
#include "ops/cuda/kernel_common.cuh"

namespace lt::ops::cuda {

namespace {

__device__ __forceinline__ int64_t target_of(const void* targets, bool wide, int64_t r) {
  return wide ? static_cast<const int64_t*>(targets)[r] : static_cast<const int32_t*>(targets)[r];
}

// Packed: the row stride is a multiple of the 16-byte pack and the rows are
// aligned, so every pack lies inside its row; the columns past `vocab` (the
// padding) are masked on reading and written as 0.
template <typename T, bool kPacked>
__global__ void classifier_rows(T* logits, int64_t vocab, int64_t stride, const void* targets,
                                bool wide, int64_t ignore_index, float scale, bool write_grad,
                                IndexError* bad, float* row_loss) {
  __shared__ float scratch_m[32], scratch_s[32];
  const int64_t r = blockIdx.x;
  T* x = logits + r * stride;
  const int64_t t = target_of(targets, wide, r);
  const bool ignored = t == ignore_index;  // the same for the whole block
  const bool has_target = !ignored && t >= 0 && t < vocab;
  constexpr int P = kPacked ? Pack<T>::kSize : 1;
  const int64_t units = (stride + P - 1) / P;
  if (ignored) {
    if (threadIdx.x == 0) row_loss[r] = 0.0f;
    if (!write_grad) return;
    for (int64_t c = threadIdx.x; c < stride; c += blockDim.x) x[c] = from_f32<T>(0.0f);
    return;
  }
  // Read before any thread of the block writes the row (pass 2 follows the
  // block reduction's barriers).
  const float target_logit = has_target && threadIdx.x == 0 ? to_f32(x[t]) : 0.0f;
  MaxSum acc;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    if constexpr (kPacked) {
      const Pack<T> pk = load_pack(x + u * P);
#pragma unroll
      for (int j = 0; j < P; ++j) {
        if (u * P + j < vocab) add_to(acc, to_f32(pk.v[j]));
      }
    } else {
      if (u < vocab) add_to(acc, to_f32(x[u]));
    }
  }
  acc = block_max_sum(acc, scratch_m, scratch_s);
  const float lse = acc.m + logf(acc.s);
  if (threadIdx.x == 0) {
    if (!has_target) record_bad_index(bad, kIndexOpCrossEntropy, t, r, vocab, ignore_index);
    row_loss[r] = has_target ? lse - target_logit : NAN;
  }
  if (!write_grad) return;
  auto grad_at = [&](int64_t c, float v) {
    if (c >= vocab) return 0.0f;
    const float p = __expf(v - lse) * scale;
    return c == t ? p - scale : p;
  };
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    if constexpr (kPacked) {
      Pack<T> pk = load_pack(x + u * P);
#pragma unroll
      for (int j = 0; j < P; ++j) pk.v[j] = from_f32<T>(grad_at(u * P + j, to_f32(pk.v[j])));
      store_pack(x + u * P, pk);
    } else {
      x[u] = from_f32<T>(grad_at(u, to_f32(x[u])));
    }
  }
}

}  // namespace

void classifier(const Tensor& logits, int64_t vocab, const Tensor& targets, int64_t ignore_index,
                float grad_scale, const Tensor& row_loss, bool write_grad) {
  check_kernel_dtype(logits, "classifier");
  const int64_t rows = logits.size(0), stride = logits.size(1);
  if (rows == 0) return;
  LT_CHECK(rows <= 0x7fffffff, "classifier: ", rows, " rows exceed the grid");
  const Device device = logits.device();
  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = stream_for(device);
  IndexError* bad = index_error_record(device);
  const bool wide = targets.dtype() == DType::I64;
  dispatch_kernel_dtype(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto* px = static_cast<T*>(logits.data_ptr());
    auto* ploss = static_cast<float*>(row_loss.data_ptr());
    const int threads = row_threads(stride, Pack<T>::kSize);
    const auto grid = static_cast<unsigned>(rows);
    if (stride % Pack<T>::kSize == 0 && aligned16(px)) {
      classifier_rows<T, true><<<grid, threads, 0, stream>>>(px, vocab, stride, targets.data_ptr(),
                                                             wide, ignore_index, grad_scale,
                                                             write_grad, bad, ploss);
    } else {
      classifier_rows<T, false><<<grid, threads, 0, stream>>>(px, vocab, stride, targets.data_ptr(),
                                                              wide, ignore_index, grad_scale,
                                                              write_grad, bad, ploss);
    }
    LT_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace lt::ops::cuda
