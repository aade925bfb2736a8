// A bad token id or target stops a resident bf16 step on the GPU with the
// error that names it, before any update, although no kernel reads it back
// when it runs: the kernels record it on the device and the step throws it
// after its one wait (support/bad_index_step.h; the CPU's twin is
// tests/exec/resident_bad_index_test.cpp, with the same message parts).
#include <gtest/gtest.h>

#include "gpu_test_support.h"
#include "support/bad_index_step.h"

namespace lt::testing {
namespace {

TEST(ResidentBadIndexGpu, BadIdStopsTheStepBeforeTheUpdate) {
  LT_REQUIRE_GPU();
  expect_bad_index_stops_the_step(
      Device::cuda(0), DType::BF16, spoil_id,
      {"embedding: id 97 (flat position 5 of", "is outside the vocabulary [0, 97)"});
}

TEST(ResidentBadIndexGpu, BadTargetStopsTheStepBeforeTheUpdate) {
  LT_REQUIRE_GPU();
  expect_bad_index_stops_the_step(Device::cuda(0), DType::BF16, spoil_target,
                                  {"target 97 at row 14 is outside the vocabulary [0, 97)"});
}

}  // namespace
}  // namespace lt::testing
