#include "core/device.h"

#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#endif

namespace lt {

bool cuda_device_visible() {
#ifdef LT_WITH_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

}  // namespace lt
