// Tensor::randn's parallel path for large tensors: the values follow the
// normal distribution (checked against its known moments and mass within
// one standard deviation), and they are the documented streams (a seed from
// the caller's generator, one generator per run of elements), computed here
// one element at a time, so they cannot depend on the thread count.
#include <gtest/gtest.h>

#include <cmath>

#include "core/random.h"
#include "core/tensor.h"

namespace lt {
namespace {

constexpr int64_t kLarge = Tensor::kParallelRandnElements + 12345;  // a partial last run

TEST(Randn, LargeTensorHasNormalMomentsAndMassWithinOneSigma) {
  Generator gen(7);
  const double stddev = 0.02;
  const Tensor t = Tensor::randn({kLarge}, gen, DType::F32, stddev);
  const float* v = t.data<float>();
  double sum = 0, squares = 0, fourth = 0;
  int64_t within = 0;
  for (int64_t i = 0; i < kLarge; ++i) {
    const double z = v[i] / stddev;
    sum += z;
    squares += z * z;
    fourth += z * z * z * z;
    within += std::abs(z) < 1.0;
  }
  const double n = static_cast<double>(kLarge);
  // Six standard errors of each estimate under N(0, 1): var(z) = 1,
  // var(z^2) = 2, var(z^4) = 96, and a Bernoulli(0.6827) share.
  EXPECT_NEAR(sum / n, 0.0, 6.0 / std::sqrt(n));
  EXPECT_NEAR(squares / n, 1.0, 6.0 * std::sqrt(2.0 / n));
  EXPECT_NEAR(fourth / n, 3.0, 6.0 * std::sqrt(96.0 / n));
  const double p = std::erf(1.0 / std::sqrt(2.0));
  EXPECT_NEAR(within / n, p, 6.0 * std::sqrt(p * (1 - p) / n));
}

TEST(Randn, LargeTensorIsTheDocumentedStreamsWhateverTheThreads) {
  Generator gen(11), replay(11);
  const Tensor t = Tensor::randn({kLarge}, gen, DType::F32, 1.0);
  const uint64_t seed = replay.next_u64();
  const float* v = t.data<float>();
  const int64_t run = Tensor::kRandnRunElements;
  for (int64_t r = 0; r * run < kLarge; ++r) {
    Generator own(split_seed(seed, static_cast<uint64_t>(r)));
    for (int64_t i = r * run; i < std::min(kLarge, (r + 1) * run); ++i)
      ASSERT_EQ(v[i], static_cast<float>(own.normal())) << "element " << i;
  }
  // The caller's generator advanced by exactly the one seed draw.
  EXPECT_EQ(gen.next_u64(), replay.next_u64());
}

TEST(Randn, NeighbouringRunsAreUncorrelated) {
  Generator gen(3);
  const Tensor t = Tensor::randn({kLarge}, gen, DType::F32, 1.0);
  const float* v = t.data<float>();
  const int64_t run = Tensor::kRandnRunElements;
  double cross = 0;
  for (int64_t i = 0; i < run; ++i) cross += static_cast<double>(v[i]) * v[i + run];
  // The mean product of independent N(0,1) pairs has standard error 1/sqrt(n).
  EXPECT_NEAR(cross / static_cast<double>(run), 0.0, 6.0 / std::sqrt(static_cast<double>(run)));
}

TEST(Randn, SmallTensorDrawsInOrderFromTheGenerator) {
  Generator gen(5), replay(5);
  const Tensor t = Tensor::randn({1000}, gen, DType::F32, 2.0);
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(t.data<float>()[i], static_cast<float>(2.0 * replay.normal()));
}

}  // namespace
}  // namespace lt
