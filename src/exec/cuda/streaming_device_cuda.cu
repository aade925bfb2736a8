// The one CUDA runtime call the streaming device makes itself; streams and
// events go through core/stream.h.
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace lt::exec::cuda_copy {

// Declared in exec/cuda/streaming_device_cuda.h, whose tensor and optimizer
// headers stay out of nvcc.
void copy_async(int device, void* dst, const void* src, size_t bytes, void* stream);

void copy_async(int device, void* dst, const void* src, size_t bytes, void* stream) {
  cudaError_t status = cudaSetDevice(device);
  if (status == cudaSuccess) {
    status = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
  }
  LT_CHECK(status == cudaSuccess, "streaming device: cudaMemcpyAsync of ", bytes,
           " bytes failed: ", std::string(cudaGetErrorString(status)));
}

}  // namespace lt::exec::cuda_copy
