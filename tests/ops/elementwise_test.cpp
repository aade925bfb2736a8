// Elementwise ops and views: forward against float64 loops, gradients
// against central differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "ops/elementwise.h"
#include "support/errors.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::all_close;
using testing::error_of;
using testing::gradcheck;
using testing::randn64;

TEST(Elementwise, BroadcastingForwardMatchesLoops) {
  Generator gen(1);
  Tensor a = randn64({2, 1, 4}, gen);
  Tensor b = randn64({3, 1}, gen);
  Tensor y = ops::mul(a, b);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  auto av = a.to_doubles(), bv = b.to_doubles(), yv = y.to_doubles();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(yv[(i * 3 + j) * 4 + k], av[i * 4 + k] * bv[j]);
}

TEST(Elementwise, StridedInputsAndHalfTypes) {
  Generator gen(2);
  Tensor a = randn64({3, 5}, gen);
  Tensor at = a.transpose(0, 1);  // non-contiguous
  Tensor y = ops::add(at, at);
  EXPECT_TRUE(all_close(y, ops::scale(at.contiguous(), 2.0), 0, 0));
  Tensor h = a.to(DType::BF16);
  Tensor hy = ops::add(h, h);
  EXPECT_EQ(hy.dtype(), DType::BF16);
  EXPECT_TRUE(all_close(hy.to_doubles(), ops::scale(h, 2.0).to_doubles(), 0, 0));
  EXPECT_THROW(ops::add(a, a.to(DType::F32)), Error);
}

TEST(Elementwise, SumMeanAndSumToMatchLoops) {
  Generator gen(3);
  Tensor a = randn64({2, 3, 4}, gen);
  auto av = a.to_doubles();
  Tensor s = ops::sum(a, {0, 2});
  ASSERT_EQ(s.shape(), (Shape{3}));
  for (int j = 0; j < 3; ++j) {
    double acc = 0;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) acc += av[(i * 3 + j) * 4 + k];
    EXPECT_NEAR(s.to_doubles()[j], acc, 1e-12);
  }
  EXPECT_EQ(ops::sum(a, {1}, true).shape(), (Shape{2, 1, 4}));
  EXPECT_NEAR(ops::mean(a, {0, 1, 2}).item() * 24, ops::sum_all(a).item(), 1e-12);
  EXPECT_TRUE(
      all_close(ops::sum_to(a, {3, 1}), ops::sum(a, {0, 2}, true).reshape({3, 1}), 1e-12, 0));
}

// a + b in float64, rounded once to `dtype`. For f32 and bf16 inputs the
// float64 sum is exact, so this is add's rule (widen to f32, add, round).
std::vector<double> rounded_sums(const std::vector<double>& a, const std::vector<double>& b,
                                 DType dtype) {
  std::vector<double> sums(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double s = a[i] + b[i];
    if (dtype == DType::F32)
      sums[i] = static_cast<float>(s);
    else if (dtype == DType::BF16)
      sums[i] = bf16_to_f32(f32_to_bf16(static_cast<float>(s)));
    else
      sums[i] = s;
  }
  return sums;
}

TEST(Elementwise, AddInPlaceRoundsOnceLikeAdd) {
  Generator gen(7);
  // 120000 elements: several parallel chunks.
  for (DType dtype : {DType::F64, DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor dst = Tensor::randn({3, 40000}, gen, dtype);
    Tensor src = Tensor::randn({3, 40000}, gen, dtype, 0.3);
    const std::vector<double> expected = rounded_sums(dst.to_doubles(), src.to_doubles(), dtype);
    void* const data = dst.data_ptr();
    ops::add_(dst, src);
    EXPECT_EQ(dst.data_ptr(), data);
    EXPECT_EQ(dst.dtype(), dtype);
    EXPECT_TRUE(all_close(dst.to_doubles(), expected, 0, 0));
  }
}

TEST(Elementwise, AddInPlaceReadsAStridedSource) {
  Generator gen(8);
  for (DType dtype : {DType::F64, DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor dst = Tensor::randn({7, 13}, gen, dtype);
    Tensor src = Tensor::randn({13, 7}, gen, dtype).transpose(0, 1);  // [7, 13], strides (1, 7)
    ASSERT_FALSE(src.is_contiguous());
    const std::vector<double> expected = rounded_sums(dst.to_doubles(), src.to_doubles(), dtype);
    ops::add_(dst, src);
    EXPECT_TRUE(all_close(dst.to_doubles(), expected, 0, 0));
    Tensor stepped = Tensor::randn({7, 26}, gen, dtype).slice(1, 0, 26, 2);  // every other column
    const std::vector<double> expected2 =
        rounded_sums(dst.to_doubles(), stepped.to_doubles(), dtype);
    ops::add_(dst, stepped);
    EXPECT_TRUE(all_close(dst.to_doubles(), expected2, 0, 0));
  }
}

TEST(Elementwise, AddInPlaceRefusesAStridedDestinationAndMismatches) {
  Generator gen(9);
  Tensor a = Tensor::randn({7, 13}, gen);
  Tensor strided = Tensor::randn({13, 7}, gen).transpose(0, 1);
  const std::vector<double> before = strided.to_doubles();
  EXPECT_THAT(error_of([&] { ops::add_(strided, a); }),
              ::testing::HasSubstr("the destination must be contiguous"));
  EXPECT_EQ(strided.to_doubles(), before);  // untouched
  EXPECT_THAT(error_of([&] {
                ops::add_(a, Tensor::randn({13, 7}, gen));
              }),
              ::testing::AllOf(::testing::HasSubstr("add_"), ::testing::HasSubstr("[13, 7]"),
                               ::testing::HasSubstr("differ")));
  // No broadcasting either.
  EXPECT_THAT(error_of([&] { ops::add_(a, Tensor::randn({13}, gen)); }),
              ::testing::HasSubstr("differ"));
  EXPECT_THAT(error_of([&] { ops::add_(a, a.to(DType::BF16)); }),
              ::testing::AllOf(::testing::HasSubstr("bf16"), ::testing::HasSubstr("differ")));
}

TEST(ElementwiseGrad, BinaryOpsWithBroadcasting) {
  Generator gen(4);
  auto a = randn64({2, 3, 4}, gen), b = randn64({3, 1}, gen);
  auto c = Tensor::uniform({4}, gen, 0.5, 2.0, DType::F64);  // away from zero for div
  EXPECT_TRUE(gradcheck([](auto& x) { return add(x[0], x[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](auto& x) { return sub(x[0], x[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](auto& x) { return mul(x[0], x[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](auto& x) { return div(x[0], x[1]); }, {a, c}));
  EXPECT_TRUE(gradcheck([](auto& x) { return scale(x[0], -1.5); }, {a}));
}

TEST(ElementwiseGrad, Reductions) {
  Generator gen(5);
  auto a = randn64({3, 2, 5}, gen);
  EXPECT_TRUE(gradcheck([](auto& x) { return sum(x[0], {1}); }, {a}));
  EXPECT_TRUE(gradcheck([](auto& x) { return sum(x[0], {0, -1}, true); }, {a}));
  EXPECT_TRUE(gradcheck([](auto& x) { return mean(x[0], {2}); }, {a}));
  EXPECT_TRUE(gradcheck([](auto& x) { return mean(x[0]); }, {a}));
}

TEST(ElementwiseGrad, Views) {
  Generator gen(6);
  auto a = randn64({2, 3, 4}, gen);
  EXPECT_TRUE(gradcheck(
      [](auto& x) {
        return mul(reshape(x[0], {6, 4}), reshape(x[0], {6, 4}));
      },
      {a}));
  EXPECT_TRUE(gradcheck([](auto& x) { return contiguous(transpose(x[0], 0, 2)); }, {a}));
  EXPECT_TRUE(gradcheck(
      [](auto& x) {
        return mul(permute(x[0], {1, 2, 0}), permute(x[0], {1, 2, 0}));
      },
      {a}));
  EXPECT_TRUE(gradcheck([](auto& x) { return scale(slice(x[0], 1, 1, 3), 2); }, {a}));
  EXPECT_TRUE(gradcheck([](auto& x) { return scale(slice(x[0], 2, -2, 100), 2); }, {a}));
  auto b = randn64({3, 1}, gen);
  EXPECT_TRUE(gradcheck([](auto& x) { return mul(expand(x[0], {2, 3, 4}), x[1]); }, {b, a}));
  EXPECT_TRUE(gradcheck([](auto& x) { return squeeze(unsqueeze(x[0], 1), 1); }, {a}));
}

TEST(ElementwiseGrad, CastSendsTheGradientBackInTheInputType) {
  Tensor a = Tensor::from_doubles({1, 2, 3}, {3}, DType::F64);
  a.set_requires_grad(true);
  Tensor y = sum(cast(scale(a, 2), DType::F32));
  EXPECT_EQ(y.dtype(), DType::F32);
  backward(y);
  EXPECT_EQ(a.grad().dtype(), DType::F64);
  EXPECT_EQ(a.grad().to_doubles(), (std::vector<double>{2, 2, 2}));
}

}  // namespace
}  // namespace lt
