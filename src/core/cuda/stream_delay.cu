#include <cstdint>

#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "core/cuda/stream_delay.h"

namespace lt::cuda {

namespace {

__device__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(uint64_t nanoseconds) {
  uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) {
  }
}

}  // namespace

void enqueue_delay(const Stream& stream, double milliseconds) {
  LT_CHECK(stream.device().is_cuda(), "enqueue_delay needs a CUDA stream, got ",
           stream.device().str());
  DeviceGuard guard(stream.device().index);
  spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream.handle())>>>(
      static_cast<uint64_t>(milliseconds * 1e6));
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lt::cuda
