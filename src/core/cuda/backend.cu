// The minimal CUDA backend for core/: device memory through the allocator
// interface and synchronous copies. The caching allocator and streams
// replace the plain allocator here (see the CUDA backend issue).
#include <map>
#include <memory>
#include <mutex>

#include "core/allocator.h"
#include "core/cuda/check.cuh"
#include "core/cuda/device_info.h"
#include "core/storage.h"

namespace lt::cuda {

namespace {

class PlainCudaAllocator final : public Allocator {
 public:
  explicit PlainCudaAllocator(int index) : index_(index) {}
  void* allocate(size_t bytes) override {
    LT_CUDA_CHECK(cudaSetDevice(index_));
    void* p = nullptr;
    LT_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
    counters_.on_allocate(bytes);
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    if (!ptr) return;
    cudaFree(ptr);  // no check: may run during teardown after the context is gone
    counters_.on_deallocate(bytes);
  }
  Device device() const override { return Device::cuda(index_); }
  AllocatorStats stats() const override { return counters_.snapshot(); }
  void reset_peak() override { counters_.reset_peak(); }

 private:
  int index_;
  AllocationCounters counters_;
};

Allocator* allocator_for(int index) {
  static std::mutex mutex;
  static auto* allocators = new std::map<int, std::unique_ptr<PlainCudaAllocator>>();
  std::lock_guard<std::mutex> lock(mutex);
  LT_CHECK(index >= 0 && index < device_count(), "CUDA device ", index, " does not exist (",
           device_count(), " visible)");
  auto& slot = (*allocators)[index];
  if (!slot) slot = std::make_unique<PlainCudaAllocator>(index);
  return slot.get();
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  cudaMemcpyKind kind = dst_device.is_cuda() ? (src_device.is_cuda() ? cudaMemcpyDeviceToDevice
                                                                     : cudaMemcpyHostToDevice)
                                             : cudaMemcpyDeviceToHost;
  LT_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, kind));
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::string device_name(int index) {
  cudaDeviceProp prop{};
  LT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

size_t device_total_memory(int index) {
  cudaDeviceProp prop{};
  LT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.totalGlobalMem;
}

void register_backend() {
  register_device_allocator(DeviceKind::CUDA, &allocator_for);
  register_device_copy(&copy);
}

}  // namespace lt::cuda
