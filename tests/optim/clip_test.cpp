// Global-norm clipping against torch.nn.utils.clip_grad_norm_'s definition,
// evaluated in float64 here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "nn/module.h"
#include "optim/clip.h"

namespace lt::optim {
namespace {

// Gradients of several shapes and dtypes, one large enough for several
// 2^16-element chunks, and one parameter without a gradient.
struct Model {
  nn::NamedParameters params;
  double reference_squared_sum = 0;  // float64, from the stored gradient values
};

Model make_model(double grad_stddev) {
  Generator gen(21);
  Model m;
  const std::vector<std::pair<Shape, DType>> specs = {
      {{5}, DType::F32}, {{13, 17}, DType::BF16}, {{3, 70001}, DType::F32}, {{9}, DType::F32}};
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& [shape, dtype] = specs[i];
    const std::string name = "p" + std::to_string(i);
    Tensor p = nn::make_parameter(Tensor::zeros(shape), name);
    if (i != 3) {  // p3 has no gradient and must not count
      Tensor g = Tensor::randn(shape, gen, dtype, grad_stddev);
      p.set_grad(g);
      for (double x : g.to_doubles()) m.reference_squared_sum += x * x;
    }
    m.params.emplace_back(name, p);
  }
  return m;
}

TEST(Clip, NormMatchesFloat64Reference) {
  Model m = make_model(0.01);
  EXPECT_NEAR(grad_squared_sum(m.params), m.reference_squared_sum, 1e-12 * m.reference_squared_sum);
  EXPECT_NEAR(global_grad_norm(m.params), std::sqrt(m.reference_squared_sum),
              1e-12 * std::sqrt(m.reference_squared_sum));
}

TEST(Clip, NoGradientsGiveZeroNorm) {
  nn::NamedParameters params = {{"w", nn::make_parameter(Tensor::zeros({3}), "w")}};
  EXPECT_EQ(global_grad_norm(params), 0.0);
  EXPECT_EQ(clip_scale(0.0, 1.0), 1.0);
}

TEST(Clip, ScaleFollowsTorchFormula) {
  // Over the limit: max_norm / (total_norm + 1e-6), as torch computes it.
  EXPECT_DOUBLE_EQ(clip_scale(10.0, 1.0), 1.0 / (10.0 + 1e-6));
  EXPECT_DOUBLE_EQ(clip_scale(2.5, 0.5), 0.5 / (2.5 + 1e-6));
  // Under the limit: no clipping. At it, the 1e-6 makes the factor just
  // under 1, as in torch (clamp(max=1) leaves it).
  EXPECT_EQ(clip_scale(0.3, 1.0), 1.0);
  EXPECT_EQ(clip_scale(0.999, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(clip_scale(1.0, 1.0), 1.0 / (1.0 + 1e-6));
}

TEST(Clip, OffWhenMaxNormIsNotPositive) {
  EXPECT_EQ(clip_scale(1e6, 0.0), 1.0);
  EXPECT_EQ(clip_scale(1e6, -1.0), 1.0);
  EXPECT_EQ(clip_scale(std::numeric_limits<double>::infinity(), 0.0), 1.0);
}

TEST(Clip, NonFiniteNormsBehaveAsTorch) {
  EXPECT_TRUE(std::isnan(clip_scale(std::numeric_limits<double>::quiet_NaN(), 1.0)));
  EXPECT_EQ(clip_scale(std::numeric_limits<double>::infinity(), 1.0), 0.0);
}

// After scaling every gradient by clip_scale, the global norm is max_norm
// (just under it, by the 1e-6 in the denominator).
TEST(Clip, ScaledGradientsHaveTheMaximumNorm) {
  Model m = make_model(1.0);
  const double norm = global_grad_norm(m.params);
  const double max_norm = 1.0;
  ASSERT_GT(norm, 10 * max_norm);
  const double scale = clip_scale(norm, max_norm);
  double reference = 0;
  for (const auto& [name, p] : m.params) {
    if (!p.grad().defined()) continue;
    std::vector<double> g = p.grad().to_doubles();
    for (double& x : g) {
      x *= scale;
      reference += x * x;
    }
  }
  EXPECT_NEAR(std::sqrt(reference), max_norm * norm / (norm + 1e-6), 1e-12);
  EXPECT_LT(std::sqrt(reference), max_norm);
}

}  // namespace
}  // namespace lt::optim
