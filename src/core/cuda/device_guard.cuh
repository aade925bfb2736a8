#pragma once
// Makes `device` the calling thread's current CUDA device for a scope and
// restores the previous one, so that calls on a stream, event or pointer of
// one device never depend on which device the caller last selected.
#include "core/cuda/check.cuh"

namespace lt::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    LT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device_) LT_CUDA_CHECK(cudaSetDevice(device_));
  }
  ~DeviceGuard() {
    if (previous_ != device_) cudaSetDevice(previous_);  // no throw from a destructor
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_;
  int previous_ = 0;
};

}  // namespace lt::cuda
