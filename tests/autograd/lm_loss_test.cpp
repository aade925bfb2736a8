// The fused, chunked LM loss against a float64 loop and finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

double reference_loss(const Tensor& h, const Tensor& w, const std::vector<int64_t>& t,
                      double denom) {
  auto hv = h.to_doubles(), wv = w.to_doubles();
  const int64_t n = h.size(0), c = h.size(1), v = w.size(0);
  double total = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (t[r] == -100) continue;
    std::vector<double> logits(v);
    double mx = -1e300;
    for (int64_t j = 0; j < v; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < c; ++k) acc += hv[r * c + k] * wv[j * c + k];
      logits[j] = acc;
      mx = std::max(mx, acc);
    }
    double se = 0;
    for (double l : logits) se += std::exp(l - mx);
    total += mx + std::log(se) - logits[t[r]];
  }
  return total / denom;
}

TEST(LmHeadLoss, MatchesFloat64LoopWithIgnoredRows) {
  Generator gen(3);
  Tensor h = testing::randn64({9, 5}, gen), w = testing::randn64({7, 5}, gen);
  std::vector<int64_t> t = {0, 6, -100, 3, 3, -100, 1, 2, 5};
  Tensor targets = Tensor::from_vector(t, {9});
  Tensor loss = lm_head_loss(h, w, targets, 4.0);
  EXPECT_NEAR(loss.item(), reference_loss(h, w, t, 4.0), 1e-12);
  // f32 inputs give an f32 loss close to the float64 value.
  Tensor loss32 = lm_head_loss(h.to(DType::F32), w.to(DType::F32), targets, 4.0);
  EXPECT_EQ(loss32.dtype(), DType::F32);
  EXPECT_NEAR(loss32.item(), reference_loss(h, w, t, 4.0), 1e-5);
}

TEST(LmHeadLoss, GradientsMatchFiniteDifferences) {
  Generator gen(4);
  Tensor h = testing::randn64({6, 4}, gen), w = testing::randn64({5, 4}, gen);
  Tensor targets = Tensor::from_vector<int64_t>({1, -100, 4, 0, 2, 2}, {6});
  EXPECT_TRUE(testing::gradcheck(
      [&](const std::vector<Tensor>& x) { return lm_head_loss(x[0], x[1], targets, 5.0); },
      {h, w}));
}

TEST(LmHeadLoss, ChunksLargeVocabulariesWithoutChangingTheResult) {
  // V large enough that rows are processed in several chunks (16M / V rows each).
  Generator gen(5);
  const int64_t v = 1 << 20, n = 40;
  Tensor h = Tensor::randn({n, 2}, gen, DType::F32), w = Tensor::randn({v, 2}, gen, DType::F32);
  std::vector<int64_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int64_t>(gen.below(v));
  Tensor loss = lm_head_loss(h, w, Tensor::from_vector(t, {n}), static_cast<double>(n));
  EXPECT_NEAR(loss.item(), reference_loss(h, w, t, static_cast<double>(n)), 1e-3);
}

}  // namespace
}  // namespace lt
