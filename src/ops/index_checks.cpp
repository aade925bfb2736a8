#include "ops/index_checks.h"

#include "ops/cuda/index_check.h"

namespace lt::ops {

namespace {
thread_local bool deferred = false;
}  // namespace

DeferIndexChecks::DeferIndexChecks() : previous_(deferred) {
  deferred = true;
}

DeferIndexChecks::~DeferIndexChecks() {
  deferred = previous_;
}

bool index_checks_deferred() {
  return deferred;
}

void check_index_errors(Device device) {
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) cuda::throw_recorded_index_error(device);
#else
  (void)device;
#endif
}

}  // namespace lt::ops
