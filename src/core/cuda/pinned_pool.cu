// Page-locked host memory behind core/pinned_pool.h (see runtime_calls.h).
#include "core/cuda/check.cuh"
#include "core/cuda/runtime_calls.h"

namespace lt::cuda {

void* pinned_alloc(size_t bytes) {
  void* ptr = nullptr;
  // Portable: pinned for every device's context, so one pool serves all GPUs.
  cudaError_t status = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // the pool handles it: empty the cache, retry, report
    return nullptr;
  }
  LT_CUDA_CHECK(status);
  return ptr;
}

void pinned_free(void* ptr) noexcept {
  cudaFreeHost(ptr);  // no check: may run at exit, after the context is gone
  cudaGetLastError();
}

void host_register(void* ptr, size_t bytes) {
  LT_CUDA_CHECK(cudaHostRegister(ptr, bytes, cudaHostRegisterPortable));
}

void host_unregister(void* ptr) noexcept {
  cudaHostUnregister(ptr);  // no check: may run at exit, after the context is gone
  cudaGetLastError();
}

}  // namespace lt::cuda
