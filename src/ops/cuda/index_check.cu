#include <array>
#include <mutex>
#include <string>

#include "ops/cuda/index_check.cuh"
#include "ops/cuda/index_check.h"
#include "ops/cuda/kernel_common.cuh"

namespace lt::ops::cuda {

namespace {

constexpr int kMaxDevices = 64;

const char* op_name(int32_t op) {
  switch (op) {
    case kIndexOpEmbedding:
      return "embedding";
    case kIndexOpEmbeddingBackward:
      return "embedding_backward";
    case kIndexOpCrossEntropy:
      return "cross_entropy";
    default:
      return "a CUDA kernel";
  }
}

}  // namespace

IndexError* index_error_record(Device device) {
  LT_CHECK(device.is_cuda() && device.index >= 0 && device.index < kMaxDevices,
           "index_error_record: no record for ", device.str());
  static std::mutex mutex;
  static std::array<IndexError*, kMaxDevices> records{};
  std::lock_guard<std::mutex> lock(mutex);
  IndexError*& record = records[static_cast<size_t>(device.index)];
  if (!record) {
    // Outside the caching allocator on purpose: one small block per device
    // for the whole process, never freed, so no stream ever owns it.
    ::lt::cuda::DeviceGuard guard(device.index);
    IndexError* fresh = nullptr;
    LT_CUDA_CHECK(cudaMalloc(&fresh, sizeof(IndexError)));
    cudaStream_t stream = stream_for(device);
    LT_CUDA_CHECK(cudaMemsetAsync(fresh, 0, sizeof(IndexError), stream));
    // Every stream that records into it later must see it zeroed.
    LT_CUDA_CHECK(cudaStreamSynchronize(stream));
    record = fresh;
  }
  return record;
}

void throw_recorded_index_error(Device device) {
  IndexError* record = index_error_record(device);
  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = stream_for(device);
  IndexError found{};
  LT_CUDA_CHECK(cudaMemcpyAsync(&found, record, sizeof(found), cudaMemcpyDeviceToHost, stream));
  LT_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (found.op == kIndexOpNone) return;
  // Cleared before throwing, so that the next step (or test) starts clean.
  LT_CUDA_CHECK(cudaMemsetAsync(record, 0, sizeof(IndexError), stream));
  const char* op = op_name(found.op);
  if (found.op == kIndexOpCrossEntropy) {
    fail(op, ": target ", found.value, " at row ", found.position,
         " is outside the vocabulary [0, ", found.limit, ") and is not ignore_index (",
         found.ignore_index, ") (found on ", device.str(), ")");
  }
  fail(op, ": id ", found.value, " (flat position ", found.position,
       " of the ids) is outside the vocabulary [0, ", found.limit, ") (found on ", device.str(),
       ")");
}

}  // namespace lt::ops::cuda
