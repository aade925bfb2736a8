// Activations and softmax: forward against float64 formulas written here
// and published values, gradients against central differences.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions.h"
#include "ops/activations.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::randn64;

double ref_silu(double x) {
  return x / (1.0 + std::exp(-x));
}
double ref_gelu_tanh(double x) {
  const double pi = std::acos(-1.0);
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

std::vector<double> map_doubles(const Tensor& t, double (*f)(double)) {
  std::vector<double> v = t.to_doubles();
  for (double& x : v) x = f(x);
  return v;
}

// softmax along `dim` by the definition (no max subtraction: the test
// inputs are small), from the logical values of x.
std::vector<double> reference_softmax(const Tensor& x, int64_t dim) {
  const std::vector<double> v = x.to_doubles();
  const int64_t d = normalize_dim(dim, x.dim());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.size(i);
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  const int64_t n = x.size(d);
  std::vector<double> y(v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double total = 0;
      for (int64_t k = 0; k < n; ++k) total += std::exp(v[(o * n + k) * inner + i]);
      for (int64_t k = 0; k < n; ++k) {
        const size_t at = static_cast<size_t>((o * n + k) * inner + i);
        y[at] = std::exp(v[at]) / total;
      }
    }
  }
  return y;
}

TEST(Activations, SiluAndGeluMatchPublishedValues) {
  // silu(1) = 1 / (1 + e^-1); gelu_tanh(1) as PyTorch's
  // F.gelu(x, approximate="tanh") prints it.
  Tensor x = Tensor::from_doubles({1.0, -1.0, 0.0, 3.0}, {4}, DType::F64);
  const std::vector<double> silu_v = ops::silu(x).to_doubles();
  const std::vector<double> gelu_v = ops::gelu_tanh(x).to_doubles();
  EXPECT_NEAR(silu_v[0], 0.7310585786300049, 1e-15);
  EXPECT_NEAR(silu_v[1], -0.2689414213699951, 1e-15);
  EXPECT_EQ(silu_v[2], 0.0);
  EXPECT_NEAR(gelu_v[0], 0.8411919906082768, 1e-15);
  EXPECT_NEAR(gelu_v[1], -0.15880800939172324, 1e-15);
  EXPECT_EQ(gelu_v[2], 0.0);
  EXPECT_NEAR(gelu_v[3], 2.996362607918227, 1e-14);
}

TEST(Activations, ElementwiseForwardMatchesFormulas) {
  Generator gen(21);
  Tensor x = randn64({3, 5, 7}, gen, 3.0);
  EXPECT_TRUE(all_close(ops::silu(x).to_doubles(), map_doubles(x, ref_silu), 1e-15, 1e-14));
  EXPECT_TRUE(
      all_close(ops::gelu_tanh(x).to_doubles(), map_doubles(x, ref_gelu_tanh), 1e-15, 1e-14));
  Tensor up = randn64({3, 5, 7}, gen);
  std::vector<double> expected = map_doubles(x, ref_silu), uv = up.to_doubles();
  for (size_t i = 0; i < expected.size(); ++i) expected[i] *= uv[i];
  EXPECT_TRUE(all_close(ops::swiglu(x, up).to_doubles(), expected, 1e-15, 1e-14));
  // Strided input, and f32.
  Tensor xt = x.transpose(0, 2);
  EXPECT_TRUE(all_close(ops::silu(xt).to_doubles(), map_doubles(xt, ref_silu), 1e-15, 1e-14));
  Tensor xf = x.to(DType::F32);
  EXPECT_EQ(ops::gelu_tanh(xf).dtype(), DType::F32);
  EXPECT_TRUE(
      all_close(ops::gelu_tanh(xf).to_doubles(), map_doubles(xf, ref_gelu_tanh), 1e-6, 1e-6));
  // Saturated inputs stay finite.
  Tensor extreme = Tensor::from_doubles({-1000.0, 1000.0}, {2}, DType::F32);
  EXPECT_EQ(ops::silu(extreme).to_doubles(), (std::vector<double>{0.0, 1000.0}));
  EXPECT_EQ(ops::gelu_tanh(extreme).to_doubles(), (std::vector<double>{0.0, 1000.0}));
  EXPECT_THROW(ops::swiglu(x, randn64({3, 5}, gen)), Error);
}

TEST(Activations, HalfInputsRoundTheF32Result) {
  Generator gen(22);
  for (DType half : {DType::BF16, DType::F16}) {
    Tensor x = Tensor::randn({4, 9}, gen, half, 2.0);
    Tensor up = Tensor::randn({4, 9}, gen, half);
    Tensor y = ops::silu(x);
    EXPECT_EQ(y.dtype(), half);
    // One rounding of the output: 2^-9 relative for bf16, below 2^-8 bound.
    EXPECT_TRUE(all_close(y.to_doubles(), map_doubles(x, ref_silu), 1e-6, 1.0 / 256));
    EXPECT_TRUE(
        all_close(ops::gelu_tanh(x).to_doubles(), map_doubles(x, ref_gelu_tanh), 1e-6, 1.0 / 256));
    std::vector<double> expected = map_doubles(x, ref_silu), uv = up.to_doubles();
    for (size_t i = 0; i < expected.size(); ++i) expected[i] *= uv[i];
    EXPECT_TRUE(all_close(ops::swiglu(x, up).to_doubles(), expected, 1e-6, 1.0 / 256));
    Tensor s = ops::softmax(x, -1);
    EXPECT_EQ(s.dtype(), half);
    EXPECT_TRUE(all_close(s.to_doubles(), reference_softmax(x, -1), 1e-6, 1.0 / 256));
  }
}

TEST(Softmax, EveryDimMatchesTheDefinition) {
  Generator gen(23);
  Tensor x = randn64({3, 4, 5}, gen);
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    EXPECT_TRUE(
        all_close(ops::softmax(x, dim).to_doubles(), reference_softmax(x, dim), 1e-15, 1e-13));
  }
  Tensor xt = x.transpose(0, 2);  // strided
  EXPECT_TRUE(all_close(ops::softmax(xt, 1).to_doubles(), reference_softmax(xt, 1), 1e-15, 1e-13));
  Tensor xf = x.to(DType::F32);
  EXPECT_TRUE(all_close(ops::softmax(xf, 1).to_doubles(), reference_softmax(xf, 1), 1e-7, 1e-5));
}

TEST(Softmax, LargeLogitsStayFinite) {
  // exp(1000) overflows; the max-subtracted form gives softmax([0, 1, 2]).
  Tensor x = Tensor::from_doubles({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3}, DType::F32);
  Tensor shifted = Tensor::from_doubles({0, 1, 2, 0, -1, -2}, {2, 3}, DType::F64);
  EXPECT_TRUE(all_close(ops::softmax(x).to_doubles(), reference_softmax(shifted, -1), 1e-7, 1e-6));
}

TEST(ActivationsGrad, ElementwiseFunctions) {
  Generator gen(24);
  Tensor x = randn64({3, 5, 7}, gen, 2.0), up = randn64({3, 5, 7}, gen);
  EXPECT_TRUE(gradcheck([](auto& v) { return silu(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](auto& v) { return gelu_tanh(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](auto& v) { return swiglu(v[0], v[1]); }, {x, up}));
}

TEST(ActivationsGrad, SwigluWithOneInputFrozen) {
  Generator gen(25);
  Tensor gate = randn64({4, 3}, gen), up = randn64({4, 3}, gen);
  // up frozen: only the gate gradient, which still reads up.
  EXPECT_TRUE(gradcheck([up](auto& v) { return swiglu(v[0], up); }, {gate}));
  // gate frozen: only the up gradient, which reads gate alone.
  EXPECT_TRUE(gradcheck([gate](auto& v) { return swiglu(gate, v[0]); }, {up}));
}

TEST(ActivationsGrad, SoftmaxEveryDim) {
  Generator gen(26);
  Tensor x = randn64({2, 3, 4}, gen);
  for (int64_t dim : {0, 1, -1}) {
    SCOPED_TRACE(dim);
    EXPECT_TRUE(gradcheck([dim](auto& v) { return softmax(v[0], dim); }, {x}));
  }
}

}  // namespace
}  // namespace lt
