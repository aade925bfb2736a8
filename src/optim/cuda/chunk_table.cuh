#pragma once
// Multi-tensor launches (adamw.cu, grad_norm.cu): a host table with one row
// per tensor, uploaded once per launch; thread block b works on chunk b of
// the concatenation, and finds its tensor by binary search over the rows'
// first_chunk (ascending, starting at 0).
#include <vector>

#include "ops/cuda/kernel_common.cuh"

namespace lt::optim::cuda {

// Copies `rows` into a new device buffer on `stream` and returns the buffer
// (it owns the memory; stream-ordered, so it may be dropped right after the
// launch that reads it). A copy from pageable memory is staged before
// cudaMemcpyAsync returns, so `rows` may go away too.
template <typename Row>
Tensor upload_table(const std::vector<Row>& rows, Device device, cudaStream_t stream) {
  const auto bytes = static_cast<int64_t>(rows.size() * sizeof(Row));
  Tensor buffer = Tensor::empty({bytes}, DType::U8, device);
  LT_CUDA_CHECK(cudaMemcpyAsync(buffer.data_ptr(), rows.data(), static_cast<size_t>(bytes),
                                cudaMemcpyHostToDevice, stream));
  return buffer;
}

// The last row whose first_chunk <= chunk.
template <typename Row>
__device__ __forceinline__ int row_of_chunk(const Row* rows, int count, int64_t chunk) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (rows[mid].first_chunk <= chunk) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace lt::optim::cuda
