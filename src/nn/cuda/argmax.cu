// One block per row: each thread keeps the best (value, index) of its
// strided columns, then the block reduces pairs (larger value, else lower
// index), so the answer does not depend on the block size.
#include "nn/cuda/argmax.h"
#include "ops/cuda/kernel_common.cuh"

namespace lt::nn::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ bool better(float v, int i, float best_v, int best_i) {
  return v > best_v || (v == best_v && i < best_i);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const T* logits, int64_t cols, int32_t* out) {
  const T* row = logits + blockIdx.x * cols;
  float best_v = -INFINITY;
  int best_i = 0x7fffffff;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = ops::cuda::to_f32(row[c]);
    if (better(v, static_cast<int>(c), best_v, best_i)) {
      best_v = v;
      best_i = static_cast<int>(c);
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best_v, offset);
    const int i = __shfl_xor_sync(0xffffffffu, best_i, offset);
    if (better(v, i, best_v, best_i)) {
      best_v = v;
      best_i = i;
    }
  }
  __shared__ float warp_v[kThreads / 32];
  __shared__ int warp_i[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    warp_v[warp] = best_v;
    warp_i[warp] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      if (better(warp_v[w], warp_i[w], best_v, best_i)) {
        best_v = warp_v[w];
        best_i = warp_i[w];
      }
    }
    // A row of NaNs keeps index 0, as no comparison with NaN is true.
    out[blockIdx.x] = best_i == 0x7fffffff ? 0 : best_i;
  }
}

}  // namespace

Tensor argmax_rows(const Tensor& logits_in) {
  ops::cuda::check_kernel_dtype(logits_in, "argmax");
  LT_CHECK(logits_in.dim() == 2 && logits_in.size(1) > 0 && logits_in.size(1) <= 0x7fffffff,
           "argmax: logits must be [rows, columns], got ", logits_in.str());
  const Tensor logits = ops::cuda::dense(logits_in);
  Tensor out = Tensor::empty({logits.size(0)}, DType::I32, logits.device());
  if (logits.size(0) == 0) return out;
  ::lt::cuda::DeviceGuard guard(logits.device().index);
  cudaStream_t stream = ops::cuda::stream_for(logits.device());
  ops::cuda::dispatch_kernel_dtype(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    argmax_kernel<T><<<static_cast<unsigned>(logits.size(0)), kThreads, 0, stream>>>(
        static_cast<const T*>(logits.data_ptr()), logits.size(1),
        static_cast<int32_t*>(out.data_ptr()));
  });
  LT_CUDA_CHECK(cudaGetLastError());
  return out;
}

}  // namespace lt::nn::cuda
