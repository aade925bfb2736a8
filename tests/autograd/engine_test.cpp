// The engine against hand-derived float64 gradients.
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"

namespace lt {
namespace {

Tensor leaf(std::vector<double> v, const Shape& shape) {
  Tensor t = Tensor::from_doubles(v, shape, DType::F64);
  t.set_requires_grad(true);
  return t;
}

TEST(Engine, DiamondGraphSumsBothPaths) {
  // y = sum(a*b + a*a)  =>  dy/da = b + 2a, dy/db = a
  Tensor a = leaf({1, -2, 3}, {3});
  Tensor b = leaf({4, 5, -6}, {3});
  Tensor y = sum(add(mul(a, b), mul(a, a)));
  EXPECT_DOUBLE_EQ(y.item(), (4 - 10 - 18) + (1 + 4 + 9));
  backward(y);
  EXPECT_EQ(a.grad().to_doubles(), (std::vector<double>{6, 1, 0}));
  EXPECT_EQ(b.grad().to_doubles(), (std::vector<double>{1, -2, 3}));
}

TEST(Engine, GradientsAccumulateAcrossBackwardCalls) {
  Tensor a = leaf({1, 2}, {2});
  backward(sum(scale(a, 3)));
  backward(sum(scale(a, 4)));
  EXPECT_EQ(a.grad().to_doubles(), (std::vector<double>{7, 7}));
}

// y = sum(w * c): dy/dw = c, a fresh contiguous f64 tensor each backward.
void backward_weighted(const Tensor& w, const std::vector<double>& c) {
  backward(sum(mul(w, Tensor::from_doubles(c, w.shape(), DType::F64))));
}

TEST(Engine, LaterGradientsAddIntoGradInPlaceWhenNothingElseHoldsIt) {
  Tensor w = leaf({1, 2, 3, 4}, {4});
  backward_weighted(w, {0.5, -1.25, 3, 0.1});
  ASSERT_TRUE(w.grad().is_contiguous());
  void* const data = w.grad().data_ptr();
  backward_weighted(w, {2, 0.75, -7, 0.2});
  // The float64 sums, computed here.
  EXPECT_EQ(w.grad().to_doubles(), (std::vector<double>{0.5 + 2, -1.25 + 0.75, 3 - 7, 0.1 + 0.2}));
  EXPECT_EQ(w.grad().data_ptr(), data);
  backward_weighted(w, {1, 1, 1, 1});
  EXPECT_EQ(w.grad().to_doubles(),
            (std::vector<double>{0.5 + 2 + 1, -1.25 + 0.75 + 1, 3 - 7 + 1, 0.1 + 0.2 + 1}));
  EXPECT_EQ(w.grad().data_ptr(), data);
}

TEST(Engine, AHeldGradKeepsItsValuesWhenTheNextGradientArrives) {
  Tensor w = leaf({1, 2, 3, 4}, {4});
  backward_weighted(w, {0.5, -1.25, 3, 0.1});
  Tensor held = w.grad();
  backward_weighted(w, {2, 0.75, -7, 0.2});
  EXPECT_EQ(held.to_doubles(), (std::vector<double>{0.5, -1.25, 3, 0.1}));
  EXPECT_EQ(w.grad().to_doubles(), (std::vector<double>{0.5 + 2, -1.25 + 0.75, 3 - 7, 0.1 + 0.2}));
  EXPECT_NE(w.grad().data_ptr(), held.data_ptr());
}

TEST(Engine, AViewOfGradKeepsItsValuesWhenTheNextGradientArrives) {
  Tensor w = leaf({1, 2, 3, 4}, {4});
  backward_weighted(w, {0.5, -1.25, 3, 0.1});
  // A view holds .grad's storage, not its handle.
  Tensor view = w.grad().slice(0, 1, 3);
  backward_weighted(w, {2, 0.75, -7, 0.2});
  EXPECT_EQ(view.to_doubles(), (std::vector<double>{-1.25, 3}));
  EXPECT_EQ(w.grad().to_doubles(), (std::vector<double>{0.5 + 2, -1.25 + 0.75, 3 - 7, 0.1 + 0.2}));
}

TEST(Engine, SharedGradientTensorsAreNotAliasedBetweenLeaves) {
  Tensor a = leaf({1, 2}, {2});
  Tensor b = leaf({3, 4}, {2});
  backward(sum(add(a, b)));
  ASSERT_FALSE(a.grad().storage() == b.grad().storage());
  a.grad().fill_(100);
  EXPECT_EQ(b.grad().to_doubles(), (std::vector<double>{1, 1}));
}

TEST(Engine, GradReadyHooksFireOnceWithTheFinalGradient) {
  Tensor a = leaf({1, 2}, {2});
  int calls = 0;
  std::vector<double> seen;
  a.register_grad_ready_hook([&](const Tensor& p) {
    ++calls;
    seen = p.grad().to_doubles();
  });
  // a feeds three nodes; the hook must see the sum of all three.
  Tensor y = sum(add(add(scale(a, 2), mul(a, a)), a));
  backward(y);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen, (std::vector<double>{2 + 2 + 1, 2 + 4 + 1}));
}

TEST(Engine, GraphIsFreedAfterBackward) {
  Tensor a = leaf({1, 2}, {2});
  Tensor y = sum(mul(a, a));
  backward(y);
  EXPECT_THROW(backward(y), Error);
}

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor a = leaf({1, 2}, {2});
  Tensor y;
  {
    NoGradGuard guard;
    y = mul(a, a);
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(mul(a, a).requires_grad());
  EXPECT_THROW(backward(sum(y)), Error);
}

TEST(Engine, NonScalarRootNeedsAGradient) {
  Tensor a = leaf({1, 2}, {2});
  Tensor y = scale(a, 3);
  EXPECT_THROW(backward(y), Error);
  backward(y, Tensor::from_doubles({1, 10}, {2}, DType::F64));
  EXPECT_EQ(a.grad().to_doubles(), (std::vector<double>{3, 30}));
}

TEST(Engine, DeepChainRunsWithoutRecursion) {
  Tensor a = leaf({1}, {1});
  Tensor y = a;
  for (int i = 0; i < 20000; ++i) y = scale(y, 1.0);
  backward(sum(y));
  EXPECT_EQ(a.grad().item(), 1.0);
}

TEST(Engine, DroppingADeepGraphWithoutBackwardDoesNotRecurse) {
  Tensor a = leaf({1}, {1});
  Tensor y = a;
  for (int i = 0; i < 300000; ++i) y = scale(y, 1.0);
  y = Tensor();  // would overflow the stack with recursive destruction
  SUCCEED();
}

}  // namespace
}  // namespace lt
