#include <array>
#include <atomic>
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
  // Every launch that guards indices asks for the record: once it exists
  // that is one acquire load, no lock. The first call per device makes it
  // under that device's once_flag (a failed cudaMalloc throws out of
  // call_once, which lets the next caller try again).
  static std::array<std::atomic<IndexError*>, kMaxDevices> records{};
  static std::array<std::once_flag, kMaxDevices> made;
  std::atomic<IndexError*>& slot = records[static_cast<size_t>(device.index)];
  if (IndexError* record = slot.load(std::memory_order_acquire)) return record;
  std::call_once(made[static_cast<size_t>(device.index)], [&] {
    // Outside the caching allocator on purpose: one small block per device
    // for the whole process, never freed, so no stream ever owns it.
    ::lt::cuda::DeviceGuard guard(device.index);
    IndexError* fresh = nullptr;
    LT_CUDA_CHECK(cudaMalloc(&fresh, sizeof(IndexError)));
    cudaStream_t stream = stream_for(device);
    LT_CUDA_CHECK(cudaMemsetAsync(fresh, 0, sizeof(IndexError), stream));
    // Every stream that records into it later must see it zeroed.
    LT_CUDA_CHECK(cudaStreamSynchronize(stream));
    slot.store(fresh, std::memory_order_release);
  });
  return slot.load(std::memory_order_acquire);
}

void throw_index_error(Device device, const IndexError& found) {
  // Cleared before throwing, so that the next step (or test) starts clean.
  {
    ::lt::cuda::DeviceGuard guard(device.index);
    LT_CUDA_CHECK(
        cudaMemsetAsync(index_error_record(device), 0, sizeof(IndexError), stream_for(device)));
  }
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

void throw_recorded_index_error(Device device) {
  IndexError* record = index_error_record(device);
  IndexError found{};
  {
    ::lt::cuda::DeviceGuard guard(device.index);
    cudaStream_t stream = stream_for(device);
    LT_CUDA_CHECK(cudaMemcpyAsync(&found, record, sizeof(found), cudaMemcpyDeviceToHost, stream));
    LT_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  if (found.op != kIndexOpNone) throw_index_error(device, found);
}

}  // namespace lt::ops::cuda
