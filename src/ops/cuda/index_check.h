#pragma once
// The host side of the device index guards, declared without CUDA types
// (see ops/cuda/elementwise.h and ops/cuda/index_check.cuh).
#include "core/device.h"

namespace lt::ops::cuda {

// Waits for the calling thread's current stream on `device`, then, if a
// kernel recorded a bad index on the device, clears the record and throws
// an lt::Error that names the op, the bad value, where it was, and the
// vocabulary size.
void throw_recorded_index_error(Device device);

}  // namespace lt::ops::cuda
