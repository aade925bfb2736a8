#pragma once
// What every GPU test file shares: skipping where no GPU is visible (CI
// compiles these tests on machines without one; `ctest -L gpu` runs them
// on the GPU machine).
#include <gtest/gtest.h>

#include "core/cuda/device_info.h"

#define LT_REQUIRE_GPU() \
  if (::lt::cuda::device_count() == 0) GTEST_SKIP() << "no GPU on this machine"
