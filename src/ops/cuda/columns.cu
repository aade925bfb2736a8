// ZenFlow's column kernels (ops/columns.h). A matrix is row-major [R, C];
// adjacent threads take adjacent columns, so every row read is coalesced.
#include "ops/cuda/columns.h"
#include "ops/cuda/kernel_common.cuh"

namespace lt::ops::cuda {

namespace {

// Rows summed by one block of column_abs_sums' first pass.
constexpr int64_t kRowsPerBlock = 256;
constexpr int kThreads = 256;

template <typename T>
__global__ void partial_abs_sums(const T* m, int64_t rows, int64_t cols, float* partial) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const int64_t r0 = blockIdx.y * kRowsPerBlock;
  const int64_t r1 = r0 + kRowsPerBlock < rows ? r0 + kRowsPerBlock : rows;
  float s = 0;
  for (int64_t r = r0; r < r1; ++r) s += fabsf(to_f32(m[r * cols + c]));
  partial[blockIdx.y * cols + c] = s;
}

// Adds the row blocks' partial sums of each column in block order.
__global__ void sum_partials(const float* partial, int64_t blocks, int64_t cols, float* out) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  float s = 0;
  for (int64_t b = 0; b < blocks; ++b) s += partial[b * cols + c];
  out[c] = s;
}

template <typename T>
__global__ void gather(const T* m, int64_t rows, int64_t cols, const int32_t* idx, int64_t k,
                       float* out) {
  const int64_t n = rows * k;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / k, j = i % k;
    out[i] = to_f32(m[r * cols + idx[j]]);
  }
}

template <typename T>
__global__ void scatter(T* dst, int64_t rows, int64_t cols, const int32_t* idx, int64_t k,
                        const float* src) {
  const int64_t n = rows * k;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / k, j = i % k;
    dst[r * cols + idx[j]] = from_f32<T>(src ? src[i] : 0.0f);
  }
}

unsigned column_blocks(int64_t cols) {
  return static_cast<unsigned>((cols + kThreads - 1) / kThreads);
}

// dst[:, idx] = src (or 0 when src is null).
void scatter_or_zero(const Tensor& dst, const Tensor& cols, const float* src) {
  ::lt::cuda::DeviceGuard guard(dst.device().index);
  const int64_t rows = dst.size(0), width = dst.size(1), k = cols.numel();
  if (rows * k == 0) return;
  const auto* idx = static_cast<const int32_t*>(cols.data_ptr());
  dispatch_kernel_dtype(dst.dtype(), [&](auto t) {
    using T = decltype(t);
    scatter<T><<<grid_for(rows * k, kThreads), kThreads, 0, stream_for(dst.device())>>>(
        static_cast<T*>(dst.data_ptr()), rows, width, idx, k, src);
  });
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

Tensor column_abs_sums(const Tensor& m) {
  ::lt::cuda::DeviceGuard guard(m.device().index);
  const int64_t rows = m.size(0), cols = m.size(1);
  Tensor out = Tensor::empty({cols}, DType::F32, m.device());
  if (cols == 0) return out;
  const int64_t blocks = std::max<int64_t>(1, (rows + kRowsPerBlock - 1) / kRowsPerBlock);
  Tensor partial = Tensor::empty({blocks, cols}, DType::F32, m.device());
  cudaStream_t stream = stream_for(m.device());
  dispatch_kernel_dtype(m.dtype(), [&](auto t) {
    using T = decltype(t);
    const dim3 grid(column_blocks(cols), static_cast<unsigned>(blocks));
    if (rows == 0) {
      LT_CUDA_CHECK(cudaMemsetAsync(partial.data_ptr(), 0, partial.nbytes(), stream));
    } else {
      partial_abs_sums<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(m.data_ptr()), rows,
                                                         cols, partial.data<float>());
    }
  });
  sum_partials<<<column_blocks(cols), kThreads, 0, stream>>>(partial.data<float>(), blocks, cols,
                                                             out.data<float>());
  LT_CUDA_CHECK(cudaGetLastError());
  return out;
}

Tensor gather_columns(const Tensor& m, const Tensor& cols) {
  ::lt::cuda::DeviceGuard guard(m.device().index);
  const int64_t rows = m.size(0), width = m.size(1), k = cols.numel();
  Tensor out = Tensor::empty({rows, k}, DType::F32, m.device());
  if (rows * k == 0) return out;
  dispatch_kernel_dtype(m.dtype(), [&](auto t) {
    using T = decltype(t);
    gather<T><<<grid_for(rows * k, kThreads), kThreads, 0, stream_for(m.device())>>>(
        static_cast<const T*>(m.data_ptr()), rows, width,
        static_cast<const int32_t*>(cols.data_ptr()), k, out.data<float>());
  });
  LT_CUDA_CHECK(cudaGetLastError());
  return out;
}

void scatter_columns(const Tensor& dst, const Tensor& src, const Tensor& cols) {
  scatter_or_zero(dst, cols, src.data<float>());
}

void zero_columns(const Tensor& dst, const Tensor& cols) {
  scatter_or_zero(dst, cols, nullptr);
}

}  // namespace lt::ops::cuda
