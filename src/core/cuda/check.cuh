#pragma once
// Every CUDA call goes through LT_CUDA_CHECK, which names the call, the file
// and the line. After a kernel launch, LT_CUDA_CHECK(cudaGetLastError()).
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

#define LT_CUDA_CHECK(call)                                                                 \
  do {                                                                                      \
    cudaError_t lt_cuda_status = (call);                                                    \
    if (lt_cuda_status != cudaSuccess) [[unlikely]] {                                       \
      ::lt::fail("CUDA error ", cudaGetErrorName(lt_cuda_status), " (",                     \
                 cudaGetErrorString(lt_cuda_status), ") in `" #call "` at ", __FILE__, ":", \
                 __LINE__);                                                                 \
    }                                                                                       \
  } while (0)
