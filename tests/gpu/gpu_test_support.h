#pragma once
// What every GPU test file shares: skipping where no GPU is visible (CI
// compiles these tests on machines without one; `ctest -L gpu` runs them
// on the GPU machine).
#include <gtest/gtest.h>

#include <functional>

#include "core/cuda/device_info.h"
#include "core/stream.h"

#define LT_REQUIRE_GPU() \
  if (::lt::cuda::device_count() == 0) GTEST_SKIP() << "no GPU on this machine"

namespace lt::testing {

// A benchmark's time of `call` on cuda:0's current stream: the mean of
// `calls` calls after 3 warm-ups, by CUDA events.
inline double milliseconds_per_call(const std::function<void()>& call, int calls = 20) {
  const Stream stream = current_stream(Device::cuda(0));
  for (int i = 0; i < 3; ++i) call();
  Event start(true), end(true);
  start.record(stream);
  for (int i = 0; i < calls; ++i) call();
  end.record(stream);
  end.synchronize();
  return static_cast<double>(start.elapsed_ms(end)) / calls;
}

}  // namespace lt::testing
