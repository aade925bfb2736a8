// autograd::is_unit_seed: only the gradient of ones that backward(root)
// makes itself counts, and only for the node that receives it; the LM head
// relies on it to skip reading its loss gradient back from the device.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/record.h"
#include "core/random.h"

namespace lt {
namespace {

// y = 2x recorded by hand; the backward notes what it was given.
Tensor doubled(const Tensor& x, std::vector<bool>* seen_unit) {
  Tensor out = Tensor::from_doubles({2 * x.item()}, {}, DType::F64);
  return autograd::record("doubled", {x}, out, [seen_unit](const Tensor& g) {
    seen_unit->push_back(autograd::is_unit_seed(g));
    return std::vector<Tensor>{scale(g, 2.0)};
  });
}

Tensor leaf(double v) {
  Tensor t = Tensor::from_doubles({v}, {}, DType::F64);
  t.set_requires_grad(true);
  return t;
}

TEST(UnitSeed, OnlyBackwardsOwnSeedAtTheRoot) {
  std::vector<bool> seen;
  Tensor x = leaf(3);
  backward(doubled(x, &seen));  // the root's node gets the seed
  backward(doubled(x, &seen), Tensor::from_doubles({1.0}, {}, DType::F64));  // given: not known
  backward(doubled(doubled(x, &seen), &seen));  // the inner node gets 2, computed
  EXPECT_EQ(seen, (std::vector<bool>{true, false, true, false}));
  EXPECT_FALSE(autograd::is_unit_seed(Tensor::from_doubles({1.0}, {}, DType::F64)));
  EXPECT_DOUBLE_EQ(x.grad().item(), 2 + 2 + 4);
}

// The LM head scales by its loss gradient unless it is backward's own seed:
// a given gradient of 2 doubles every gradient.
TEST(UnitSeed, LmHeadScalesByAGivenLossGradient) {
  Generator gen(5);
  auto grads = [&](const Tensor& grad_root) {
    Tensor h = Tensor::randn({6, 4}, gen, DType::F64, 1.0);
    Tensor w = Tensor::randn({9, 4}, gen, DType::F64, 1.0);
    h.set_requires_grad(true);
    w.set_requires_grad(true);
    Tensor targets = Tensor::from_vector(std::vector<int64_t>{0, 3, -100, 8, 2, 5}, {6});
    backward(lm_head_loss(h, w, targets, 5.0), grad_root);
    return std::pair{h.grad().to_doubles(), w.grad().to_doubles()};
  };
  gen = Generator(5);
  const auto once = grads(Tensor());
  gen = Generator(5);
  const auto twice = grads(Tensor::from_doubles({2.0}, {}, DType::F64));
  for (size_t i = 0; i < once.first.size(); ++i) {
    EXPECT_NEAR(twice.first[i], 2 * once.first[i], 1e-12) << "hidden " << i;
  }
  for (size_t i = 0; i < once.second.size(); ++i) {
    EXPECT_NEAR(twice.second[i], 2 * once.second[i], 1e-12) << "weight " << i;
  }
}

}  // namespace
}  // namespace lt
