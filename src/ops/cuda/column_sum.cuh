#pragma once
// Deterministic column sums: out[o][c] = sum over r < rows of term(o, r, c).
// They are the reductions over rows that backward passes need (bias and
// norm-weight gradients, sum_to over leading dims).
//
// Note [deterministic column sums]
// Atomics would make the gradient depend on the order blocks happen to
// run in. Instead the rows are cut into fixed chunks: pass 1 gives each
// (column tile, chunk) a block that sums its rows in a fixed order into an
// f32 partial; pass 2 sums each column's partials in chunk order. The
// order of additions depends only on the shape, so repeated runs agree bit
// for bit.
#include "ops/cuda/kernel_common.cuh"

namespace lt::ops::cuda {

// A block is 32 columns x 8 row lanes: a warp reads 32 consecutive elements
// of one row (coalesced), and 8 warps share a chunk's rows.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 8;

template <typename Term>
__global__ void column_partials(Term term, int64_t rows, int64_t cols, int64_t rows_per_chunk,
                                float* partial) {
  __shared__ float acc[kRowLanes][kColumnTile + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  const int64_t chunk = blockIdx.y, chunks = gridDim.y, o = blockIdx.z;
  const int64_t r0 = chunk * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  float sum = 0.0f;
  if (c < cols) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) sum += term(o, r, c);
  }
  acc[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < kRowLanes; ++k) total += acc[k][threadIdx.x];
    partial[(o * chunks + chunk) * cols + c] = total;
  }
}

template <typename T>
__global__ void column_finalize(const float* partial, int64_t outer, int64_t chunks, int64_t cols,
                                T* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < outer * cols;
       i += stride) {
    const int64_t o = i / cols, c = i % cols;
    const float* p = partial + o * chunks * cols + c;
    float total = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) total += p[k * cols];
    out[i] = from_f32<T>(total);
  }
}

// Writes `outer * cols` sums into `out` (dtype T, on `device`).
template <typename T, typename Term>
void launch_column_sum(const Term& term, int64_t outer, int64_t rows, int64_t cols, T* out,
                       Device device) {
  if (outer * cols == 0) return;
  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = stream_for(device);
  // Chunks of at least 32 rows (4 per row lane), at most 256 of them, and a
  // partial buffer of at most 2^22 floats (16 MiB).
  const int64_t cap = std::max<int64_t>(1, (int64_t{1} << 22) / (outer * cols));
  const int64_t chunks = std::clamp<int64_t>((rows + 31) / 32, 1, std::min<int64_t>(256, cap));
  const int64_t rows_per_chunk = std::max<int64_t>(1, (rows + chunks - 1) / chunks);
  LT_CHECK(outer <= 65535, "column sum: ", outer, " outer slices exceed the grid");
  Tensor partial = Tensor::empty({outer, chunks, cols}, DType::F32, device);
  dim3 grid(static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile),
            static_cast<unsigned>(chunks), static_cast<unsigned>(outer));
  column_partials<<<grid, dim3(kColumnTile, kRowLanes), 0, stream>>>(
      term, rows, cols, rows_per_chunk, static_cast<float*>(partial.data_ptr()));
  LT_CUDA_CHECK(cudaGetLastError());
  column_finalize<T><<<grid_for(outer * cols, 256), 256, 0, stream>>>(
      static_cast<float*>(partial.data_ptr()), outer, chunks, cols, out);
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lt::ops::cuda
