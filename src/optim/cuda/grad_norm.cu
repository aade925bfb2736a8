#include "optim/cuda/grad_norm.h"

#include "ops/cuda/kernel_common.cuh"
#include "optim/cuda/chunk_table.cuh"

namespace lt::optim::cuda {

namespace {

using ops::cuda::bf16;
using ops::cuda::Pack;

constexpr int kThreads = 256;
// Elements per thread block: every gradient is cut into chunks of this
// many elements (the last one shorter), one block per chunk, all gradients
// of a dtype in one launch. The chunk layout depends on the shapes only,
// which is what makes the order of additions (and so the result)
// reproducible. A multiple of every pack size, so chunks of an aligned
// tensor stay aligned.
constexpr int64_t kChunk = int64_t{1} << 16;

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

// One gradient of a multi-tensor launch (see chunk_table.cuh).
struct GradRow {
  const void* data;
  int64_t numel;
  int64_t first_chunk;  // within this launch
  int64_t packed;       // data is 16-byte aligned
};

// The sum of squares of chunk `chunk` (0-based within the gradient) of
// gradient `r`, valid in thread 0.
template <typename T>
__device__ __forceinline__ double chunk_squares(const GradRow& r, int64_t chunk) {
  const int64_t begin = chunk * kChunk;
  const int64_t n = min(kChunk, r.numel - begin);
  const T* g = static_cast<const T*>(r.data) + begin;
  double acc = 0;
  int64_t scalar_from = 0;
  if (r.packed) {
    constexpr int P = Pack<T>::kSize;
    const int64_t packs = n / P;
    for (int64_t k = threadIdx.x; k < packs; k += kThreads) {
      const Pack<T> pk = ops::cuda::load_pack(g + k * P);
#pragma unroll
      for (int j = 0; j < P; ++j) acc += sq(ops::cuda::to_f32(pk.v[j]));
    }
    scalar_from = packs * P;
  }
  for (int64_t i = scalar_from + threadIdx.x; i < n; i += kThreads) {
    acc += sq(ops::cuda::to_f32(g[i]));
  }
  return block_sum(acc);
}

// Pass 1: block b reduces chunk b of this launch's gradients (all of type
// T) and writes its sum of squares to partial[b].
template <typename T>
__global__ void __launch_bounds__(kThreads)
    partial_kernel(const GradRow* __restrict__ rows, int count, double* __restrict__ partial) {
  const int64_t chunk = blockIdx.x;
  const GradRow r = rows[row_of_chunk(rows, count, chunk)];
  const double total = chunk_squares<T>(r, chunk - r.first_chunk);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// Pass 1 for one gradient (no table to upload): block b writes the squares
// of its chunk b to partial[b]. The same arithmetic as partial_kernel.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    single_partial_kernel(GradRow r, double* __restrict__ partial) {
  const double total = chunk_squares<T>(r, blockIdx.x);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// Pass 2: one block adds every partial (all launches, in their fixed
// layout) and writes the total to *out.
__global__ void __launch_bounds__(kThreads)
    final_kernel(const double* __restrict__ partial, int64_t count, double* __restrict__ out) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) acc += partial[i];
  const double total = block_sum(acc);
  if (threadIdx.x == 0) *out = total;
}

}  // namespace

double squared_sum(const std::vector<Tensor>& grads) {
  if (grads.empty()) return 0.0;
  const Device device = grads.front().device();
  // One table per dtype (one launch each); partial slots are laid out f32
  // chunks first, then bf16 chunks.
  std::vector<GradRow> rows[2];
  int64_t chunks[2] = {0, 0};
  for (const Tensor& g : grads) {
    LT_CHECK(g.device() == device, "CUDA grad norm: gradients on ", device.str(), " and ",
             g.device().str(), "; reduce each device separately");
    ops::cuda::check_kernel_dtype(g, "CUDA grad norm");
    LT_CHECK(g.is_contiguous(), "CUDA grad norm: gradient must be contiguous, got ", g.str());
    const int64_t n = g.numel();
    if (n == 0) continue;
    const int kind = g.dtype() == DType::BF16 ? 1 : 0;
    rows[kind].push_back({g.data_ptr(), n, chunks[kind], ops::cuda::aligned16(g.data_ptr())});
    chunks[kind] += (n + kChunk - 1) / kChunk;
  }
  const int64_t total_chunks = chunks[0] + chunks[1];
  if (total_chunks == 0) return 0.0;
  LT_CHECK(chunks[0] <= 0x7fffffff && chunks[1] <= 0x7fffffff, "CUDA grad norm: ", total_chunks,
           " chunks of ", kChunk, " elements exceed one CUDA grid");

  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = ops::cuda::stream_for(device);
  // partials, then the total in the last slot; allocated on the current
  // stream, and this function waits for that stream before it is freed.
  Tensor buffer = Tensor::empty({total_chunks + 1}, DType::F64, device);
  auto* partial = static_cast<double*>(buffer.data_ptr());
  std::vector<Tensor> tables;
  for (int kind = 0; kind < 2; ++kind) {
    if (rows[kind].empty()) continue;
    tables.push_back(upload_table(rows[kind], device, stream));
    const auto* table = static_cast<const GradRow*>(tables.back().data_ptr());
    const auto count = static_cast<int>(rows[kind].size());
    const auto grid = static_cast<unsigned>(chunks[kind]);
    double* out = partial + (kind == 0 ? 0 : chunks[0]);
    if (kind == 0) {
      partial_kernel<float><<<grid, kThreads, 0, stream>>>(table, count, out);
    } else {
      partial_kernel<bf16><<<grid, kThreads, 0, stream>>>(table, count, out);
    }
    LT_CUDA_CHECK(cudaGetLastError());
  }
  final_kernel<<<1, kThreads, 0, stream>>>(partial, total_chunks, partial + total_chunks);
  LT_CUDA_CHECK(cudaGetLastError());
  double result = 0;
  LT_CUDA_CHECK(cudaMemcpyAsync(&result, partial + total_chunks, sizeof(double),
                                cudaMemcpyDeviceToHost, stream));
  LT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return result;
}

int64_t chunk_count(int64_t numel) {
  return (numel + kChunk - 1) / kChunk;
}

void enqueue_chunk_squares(const Tensor& grad, double* partial, void* stream) {
  ops::cuda::check_kernel_dtype(grad, "CUDA grad norm");
  LT_CHECK(grad.device().is_cuda(), "CUDA grad norm: gradient on ", grad.device().str());
  LT_CHECK(grad.is_contiguous(), "CUDA grad norm: gradient must be contiguous, got ", grad.str());
  const int64_t chunks = chunk_count(grad.numel());
  if (chunks == 0) return;
  LT_CHECK(chunks <= 0x7fffffff, "CUDA grad norm: ", chunks, " chunks of ", kChunk,
           " elements exceed one CUDA grid");
  ::lt::cuda::DeviceGuard guard(grad.device().index);
  const GradRow row{grad.data_ptr(), grad.numel(), 0, ops::cuda::aligned16(grad.data_ptr())};
  auto* s = static_cast<cudaStream_t>(stream);
  const auto grid = static_cast<unsigned>(chunks);
  if (grad.dtype() == DType::BF16) {
    single_partial_kernel<bf16><<<grid, kThreads, 0, s>>>(row, partial);
  } else {
    single_partial_kernel<float><<<grid, kThreads, 0, s>>>(row, partial);
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

void enqueue_zero(Device device, double* partial, int64_t count, void* stream) {
  if (count == 0) return;
  ::lt::cuda::DeviceGuard guard(device.index);
  LT_CUDA_CHECK(cudaMemsetAsync(partial, 0, static_cast<size_t>(count) * sizeof(double),
                                static_cast<cudaStream_t>(stream)));
}

void enqueue_sum_to_host(Device device, const double* partial, int64_t count, double* out,
                         double* host_out, void* stream) {
  ::lt::cuda::DeviceGuard guard(device.index);
  auto* s = static_cast<cudaStream_t>(stream);
  final_kernel<<<1, kThreads, 0, s>>>(partial, count, out);
  LT_CUDA_CHECK(cudaGetLastError());
  LT_CUDA_CHECK(cudaMemcpyAsync(host_out, out, sizeof(double), cudaMemcpyDeviceToHost, s));
}

}  // namespace lt::optim::cuda
