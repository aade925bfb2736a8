// GradNormPartials on the CPU: the sum of squares it takes from the
// grad-ready hooks against float64 sums of the stored gradients, computed
// here; and when it reads each gradient (at its hook, or at finish() for
// the gradients no hook delivered).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "nn/module.h"
#include "optim/clip.h"
#include "optim/grad_norm_partials.h"
#include "support/grad_squares.h"

namespace lt::optim {
namespace {

using lt::testing::grad_squares_f64;
using lt::testing::squares_f64;

// a: f32, four 2^16-element chunks (the last short); b: bf16; c: never
// used (no gradient); d: used twice in the graph (a tied weight: one hook,
// with both contributions summed); e: f32, used only by the first loss.
struct Fixture {
  Generator gen{7};
  nn::NamedParameters params;
  Tensor a, b, c, d, e;

  Fixture() {
    a = nn::make_parameter(Tensor::randn({3, 70001}, gen), "a");
    b = nn::make_parameter(Tensor::randn({13, 17}, gen, DType::BF16), "b");
    c = nn::make_parameter(Tensor::randn({5}, gen), "c");
    d = nn::make_parameter(Tensor::randn({9}, gen), "d");
    e = nn::make_parameter(Tensor::randn({4, 6}, gen), "e");
    params = {{"a", a}, {"b", b}, {"c", c}, {"d", d}, {"e", e}};
  }
  // sum(p * k) has the gradient k: random constants make the gradients.
  Tensor weighted(const Tensor& p) {
    const Tensor k = Tensor::randn(p.shape(), gen, DType::F32, 0.5);
    return sum(mul(p.dtype() == DType::F32 ? p : cast(p, DType::F32), k));
  }
  Tensor loss_without_e() {
    return add(add(weighted(a), weighted(b)), add(weighted(d), weighted(d)));
  }
  Tensor loss_with_e() { return add(loss_without_e(), weighted(e)); }
};

void expect_close(double got, double want) {
  ASSERT_GT(want, 0);
  EXPECT_NEAR(got, want, 1e-12 * want);
}

TEST(GradNormPartials, HookSumsMatchFloat64Reference) {
  Fixture f;
  GradNormPartials partials(f.params);
  partials.begin();
  partials.arm();
  backward(f.loss_with_e());
  partials.finish();
  const double got = partials.squared_sum();
  ASSERT_FALSE(f.c.grad().defined());
  expect_close(got, grad_squares_f64(f.params));
  // The same chunks added in the same order as the one-pass function.
  EXPECT_EQ(got, grad_squared_sum(f.params));
}

TEST(GradNormPartials, AccumulatedGradientsAndOnesNoHookDelivered) {
  Fixture f;
  GradNormPartials partials(f.params);
  partials.begin();
  backward(f.loss_with_e());  // not armed: these gradients are added to below
  partials.arm();
  backward(f.loss_without_e());  // e gets no hook here: finish() takes it
  partials.finish();
  expect_close(partials.squared_sum(), grad_squares_f64(f.params));
}

TEST(GradNormPartials, SquaresAreTakenWhenTheHookFires) {
  Fixture f;
  GradNormPartials partials(f.params);
  partials.begin();
  partials.arm();
  backward(f.loss_with_e());
  const double a_part = squares_f64(f.a.grad());
  const double d_part = squares_f64(f.d.grad());
  const double e_part = squares_f64(f.e.grad());
  // An in-place edit after a's hook is not seen (the documented limit, and
  // the evidence that the hook, not finish(), read a); b's gradient
  // replaced by another tensor after its hook is.
  f.a.grad().fill_(0.0);
  f.b.set_grad(Tensor::full(f.b.shape(), 2.0, DType::BF16));
  partials.finish();
  expect_close(partials.squared_sum(), a_part + 13 * 17 * 4.0 + d_part + e_part);
}

TEST(GradNormPartials, RemovedAfterItsHookContributesNothing) {
  Fixture f;
  GradNormPartials partials(f.params);
  partials.begin();
  partials.arm();
  backward(f.loss_with_e());
  f.a.set_grad(Tensor());
  partials.finish();
  expect_close(partials.squared_sum(), grad_squares_f64(f.params));
}

TEST(GradNormPartials, UnarmedBackwardIsReadAtFinish) {
  Fixture f;
  GradNormPartials partials(f.params);
  partials.begin();
  backward(f.loss_with_e());  // no hook records (not armed)
  f.a.grad().fill_(1.0);      // so this in-place edit is seen
  partials.finish();
  expect_close(partials.squared_sum(), grad_squares_f64(f.params));
}

TEST(GradNormPartials, BeginStartsANewStep) {
  Fixture f;
  GradNormPartials partials(f.params);
  partials.begin();
  partials.arm();
  backward(f.loss_with_e());
  partials.finish();
  expect_close(partials.squared_sum(), grad_squares_f64(f.params));
  // Next step: only d gets a gradient; a, b and e's old slots must be gone.
  for (auto& [name, p] : f.params) p.set_grad(Tensor());
  partials.begin();
  partials.arm();
  backward(f.weighted(f.d));
  partials.finish();
  const double got = partials.squared_sum();
  expect_close(got, grad_squares_f64(f.params));
  expect_close(got, squares_f64(f.d.grad()));
}

TEST(GradNormPartials, HooksOfADestroyedObjectDoNothing) {
  Fixture f;
  { GradNormPartials gone(f.params); }
  GradNormPartials partials(f.params);  // a second set of hooks on the same leaves
  partials.begin();
  partials.arm();
  backward(f.loss_with_e());
  partials.finish();
  expect_close(partials.squared_sum(), grad_squares_f64(f.params));
}

TEST(GradNormPartials, RejectsAParameterListedTwice) {
  Fixture f;
  nn::NamedParameters twice = {{"a", f.a}, {"a again", f.a}};
  EXPECT_THROW(GradNormPartials{twice}, Error);
}

}  // namespace
}  // namespace lt::optim
