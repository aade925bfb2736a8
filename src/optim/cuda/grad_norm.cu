#include "optim/cuda/grad_norm.h"

#include "ops/cuda/kernel_common.cuh"

namespace lt::optim::cuda {

namespace {

using ops::cuda::bf16;
using ops::cuda::Pack;

constexpr int kThreads = 256;
// Blocks per tensor at most: a few per SM of an H200 (132 SMs) keeps the
// pass at full bandwidth, and a fixed cap keeps the partials array small.
// The block count depends on the element count only, which is what makes
// the order of additions (and so the result) reproducible.
constexpr int64_t kMaxBlocks = 132 * 4;
// Elements a thread should see at least before another block is worth it.
constexpr int64_t kPerThread = 64;

__device__ __forceinline__ double sq(float x) {
  const double d = x;
  return d * d;
}

// The sum over the block in a fixed tree order, valid in thread 0.
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double scratch[kThreads];
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half >>= 1) {
    if (threadIdx.x < half) scratch[threadIdx.x] += scratch[threadIdx.x + half];
    __syncthreads();
  }
  return scratch[0];
}

// Pass 1: block b of this tensor writes the sum of squares of its
// grid-stride share to partial[b]. kPacked: `g` is 16-byte aligned.
template <typename T, bool kPacked>
__global__ void __launch_bounds__(kThreads)
    partial_kernel(const T* __restrict__ g, int64_t n, double* __restrict__ partial) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  double acc = 0;
  int64_t scalar_from = 0;
  if constexpr (kPacked) {
    constexpr int P = Pack<T>::kSize;
    const int64_t packs = n / P;
    for (int64_t k = first; k < packs; k += stride) {
      const Pack<T> pk = ops::cuda::load_pack(g + k * P);
#pragma unroll
      for (int j = 0; j < P; ++j) acc += sq(ops::cuda::to_f32(pk.v[j]));
    }
    scalar_from = packs * P;
  }
  for (int64_t i = scalar_from + first; i < n; i += stride) acc += sq(ops::cuda::to_f32(g[i]));
  const double total = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// Pass 2: one block adds every partial (all tensors, in their fixed layout)
// and writes the total to *out.
__global__ void __launch_bounds__(kThreads)
    final_kernel(const double* __restrict__ partial, int64_t count, double* __restrict__ out) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) acc += partial[i];
  const double total = block_sum(acc);
  if (threadIdx.x == 0) *out = total;
}

int64_t blocks_for(int64_t n) {
  const int64_t want = (n + kThreads * kPerThread - 1) / (kThreads * kPerThread);
  return std::clamp<int64_t>(want, 1, kMaxBlocks);
}

}  // namespace

double squared_sum(const std::vector<Tensor>& grads) {
  if (grads.empty()) return 0.0;
  const Device device = grads.front().device();
  for (const Tensor& g : grads) {
    LT_CHECK(g.device() == device, "CUDA grad norm: gradients on ", device.str(), " and ",
             g.device().str(), "; reduce each device separately");
    ops::cuda::check_kernel_dtype(g, "CUDA grad norm");
    LT_CHECK(g.is_contiguous(), "CUDA grad norm: gradient must be contiguous, got ", g.str());
  }
  int64_t total_blocks = 0;
  for (const Tensor& g : grads) total_blocks += blocks_for(g.numel());

  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = ops::cuda::stream_for(device);
  // partials, then the total in the last slot; allocated on the current
  // stream, and this function waits for that stream before it is freed.
  Tensor buffer = Tensor::empty({total_blocks + 1}, DType::F64, device);
  auto* partial = static_cast<double*>(buffer.data_ptr());
  int64_t offset = 0;
  for (const Tensor& g : grads) {
    const int64_t n = g.numel();
    const int64_t blocks = blocks_for(n);
    double* out = partial + offset;
    offset += blocks;
    if (n == 0) {
      LT_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), stream));
      continue;
    }
    ops::cuda::dispatch_kernel_dtype(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const auto* data = static_cast<const T*>(g.data_ptr());
      const auto grid = static_cast<unsigned>(blocks);
      if (ops::cuda::aligned16(data)) {
        partial_kernel<T, true><<<grid, kThreads, 0, stream>>>(data, n, out);
      } else {
        partial_kernel<T, false><<<grid, kThreads, 0, stream>>>(data, n, out);
      }
    });
    LT_CUDA_CHECK(cudaGetLastError());
  }
  final_kernel<<<1, kThreads, 0, stream>>>(partial, total_blocks, partial + total_blocks);
  LT_CUDA_CHECK(cudaGetLastError());
  double result = 0;
  LT_CUDA_CHECK(cudaMemcpyAsync(&result, partial + total_blocks, sizeof(double),
                                cudaMemcpyDeviceToHost, stream));
  LT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result;
}

}  // namespace lt::optim::cuda
