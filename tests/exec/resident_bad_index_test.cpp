// A bad token id or target stops a resident step on the CPU with the error
// that names it, before any update (support/bad_index_step.h; the GPU's
// twin is tests/gpu/resident_bad_index_gpu_test.cpp, with the same message
// parts).
#include <gtest/gtest.h>

#include "support/bad_index_step.h"

namespace lt::testing {
namespace {

TEST(ResidentBadIndex, BadIdStopsTheStepBeforeTheUpdate) {
  expect_bad_index_stops_the_step(
      Device::cpu(), DType::F32, spoil_id,
      {"embedding: id 97 (flat position 5 of", "is outside the vocabulary [0, 97)"});
}

TEST(ResidentBadIndex, BadTargetStopsTheStepBeforeTheUpdate) {
  expect_bad_index_stops_the_step(Device::cpu(), DType::F32, spoil_target,
                                  {"target 97 at row 14 is outside the vocabulary [0, 97)"});
}

}  // namespace
}  // namespace lt::testing
