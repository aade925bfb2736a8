#pragma once
// A kernel that keeps a stream busy for a given time, for tests that must
// show an operation waits for (or overlaps with) work on another stream,
// and for timing sanity checks. Not for production paths.
#include "core/stream.h"

namespace lt::cuda {

// Enqueues on `stream` a single-thread kernel that spins for `milliseconds`
// of GPU time (by the GPU's global nanosecond timer).
void enqueue_delay(const Stream& stream, double milliseconds);

}  // namespace lt::cuda
