// The CUDA backend for core/: the caching allocator as each device's
// default allocator, and synchronous copies.
#include "core/allocator.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "core/cuda/device_info.h"
#include "core/storage.h"
#include "core/stream.h"

namespace lt::cuda {

namespace {

Allocator* allocator_for(int index) {
  return &caching_allocator(index);
}

// Synchronous, but ordered after the work on each device's current stream:
// a tensor written by a kernel on a non-blocking stream must not be read by
// a copy on the legacy default stream, which does not wait for that stream.
void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  cudaMemcpyKind kind = dst_device.is_cuda() ? (src_device.is_cuda() ? cudaMemcpyDeviceToDevice
                                                                     : cudaMemcpyHostToDevice)
                                             : cudaMemcpyDeviceToHost;
  Device device = dst_device.is_cuda() ? dst_device : src_device;
  if (dst_device.is_cuda() && src_device.is_cuda() && !(dst_device == src_device)) {
    // Between devices the copy runs on the destination's stream: wait for
    // the work that writes the source on its own device first.
    current_stream(src_device).synchronize();
  }
  DeviceGuard guard(device.index);
  auto stream = static_cast<cudaStream_t>(current_stream(device).handle());
  LT_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, stream));
  LT_CUDA_CHECK(cudaStreamSynchronize(stream));
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

int driver_version() {
  int version = 0;
  LT_CUDA_CHECK(cudaDriverGetVersion(&version));
  return version;
}

size_t device_total_memory(int index) {
  cudaDeviceProp prop{};
  LT_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.totalGlobalMem;
}

size_t device_free_memory(int index) {
  DeviceGuard guard(index);
  size_t free_bytes = 0, total_bytes = 0;
  LT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

void register_backend() {
  register_device_allocator(DeviceKind::CUDA, &allocator_for);
  register_device_copy(&copy);
}

}  // namespace lt::cuda
