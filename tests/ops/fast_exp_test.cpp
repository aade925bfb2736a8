// The CPU's vectorizable f32 exp (ops/cpu/fast_exp.h) against libm's double
// exp, and its handling of what is not a finite number in range: NaN stays
// NaN (converting it to an integer inside would be undefined), infinities
// clamp to the ends of the range.
#include "ops/cpu/fast_exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace lt::ops::cpu {
namespace {

// The eight-lane version, one lane checked at a time.
float exp8_lane(float x, int lane) {
  Float8 v{};
  for (int k = 0; k < 8; ++k) v[k] = k == lane ? x : 0.5f * static_cast<float>(k);
  return fast_exp8(v)[lane];
}

TEST(FastExp, MatchesDoubleExpAcrossTheRange) {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.001953125 * 7.3) {
    const float xf = static_cast<float>(x);
    const double want = std::exp(static_cast<double>(xf));
    const float scalar = fast_expf(xf), vector = exp8_lane(xf, static_cast<int>(x * 10) & 7);
    worst = std::max(worst, std::abs(scalar - want) / want);
    worst = std::max(worst, std::abs(vector - want) / want);
  }
  // Cephes' polynomial: about 2 ulp (1.2e-7 per ulp).
  EXPECT_LT(worst, 4e-7);
}

TEST(FastExp, NanStaysNanAndInfinitiesClamp) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(fast_expf(nan)));
  EXPECT_TRUE(std::isnan(exp8_lane(nan, 3)));
  Float8 mixed{};
  for (int k = 0; k < 8; ++k) mixed[k] = k == 3 ? nan : 0.5f * static_cast<float>(k);
  const Float8 out = fast_exp8(mixed);
  for (int k = 0; k < 8; ++k) {
    if (k == 3) continue;
    EXPECT_NEAR(out[k] / std::exp(0.5 * k), 1.0, 4e-7) << "lane " << k << " beside a NaN lane";
  }
  const double top = std::exp(88.0);  // where large inputs are clamped, finite in f32
  EXPECT_NEAR(fast_expf(inf) / top, 1.0, 4e-7);
  EXPECT_NEAR(exp8_lane(inf, 0) / top, 1.0, 4e-7);
  EXPECT_LT(fast_expf(-inf), 1e-37f);
  EXPECT_GE(fast_expf(-inf), 0.0f);
  EXPECT_LT(exp8_lane(-inf, 7), 1e-37f);
}

}  // namespace
}  // namespace lt::ops::cpu
