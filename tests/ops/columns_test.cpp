// ZenFlow's column operations (ops/columns.h) against element-by-element
// loops in double over the same matrix, in f32 and bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/random.h"
#include "ops/columns.h"
#include "support/errors.h"

namespace lt::ops {
namespace {

Tensor random_matrix(int64_t rows, int64_t cols, DType dtype, uint64_t seed) {
  Generator gen(seed);
  return Tensor::randn({rows, cols}, gen, DType::F32).to(dtype);
}

// The matrix's values widened to double, row-major.
std::vector<double> values(const Tensor& m) {
  return m.to_doubles();
}

TEST(Columns, AbsSumsMatchABruteForceSum) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Tensor m = random_matrix(37, 53, dtype, 3);
    const std::vector<double> v = values(m);
    const std::vector<double> got = column_abs_sums(m).to_doubles();
    ASSERT_EQ(got.size(), 53u);
    for (int64_t c = 0; c < 53; ++c) {
      double want = 0;
      for (int64_t r = 0; r < 37; ++r) want += std::fabs(v[static_cast<size_t>(r * 53 + c)]);
      EXPECT_NEAR(got[static_cast<size_t>(c)], want, 1e-5 * want) << "column " << c;
    }
  }
}

TEST(Columns, GatherScatterAndZeroTouchOnlyTheChosenColumns) {
  const std::vector<int32_t> chosen = {0, 4, 5, 17, 52};
  const Tensor cols = Tensor::from_vector(chosen, {5});
  for (DType dtype : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor m = random_matrix(9, 53, dtype, 4);
    const std::vector<double> before = values(m);
    const Tensor g = gather_columns(m, cols);
    ASSERT_EQ(g.shape(), (Shape{9, 5}));
    const std::vector<double> gv = g.to_doubles();
    for (int64_t r = 0; r < 9; ++r) {
      for (size_t j = 0; j < chosen.size(); ++j)
        EXPECT_EQ(gv[static_cast<size_t>(r) * 5 + j],
                  before[static_cast<size_t>(r * 53 + chosen[j])]);
    }
    // Scatter new f32 values; bf16 rounds them to nearest even.
    Generator gen(8);
    const Tensor src = Tensor::randn({9, 5}, gen, DType::F32);
    scatter_columns(m, src, cols);
    const std::vector<double> sv = src.to_doubles();
    std::vector<double> after = values(m);
    for (int64_t r = 0; r < 9; ++r) {
      for (int64_t c = 0; c < 53; ++c) {
        const auto at = static_cast<size_t>(r * 53 + c);
        const auto j = std::find(chosen.begin(), chosen.end(), c) - chosen.begin();
        if (j == static_cast<std::ptrdiff_t>(chosen.size())) {
          EXPECT_EQ(after[at], before[at]) << r << "," << c;
        } else {
          const float wanted = static_cast<float>(sv[static_cast<size_t>(r) * 5 + j]);
          const double rounded = dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(wanted)) : wanted;
          EXPECT_EQ(after[at], rounded) << r << "," << c;
        }
      }
    }
    zero_columns(m, cols);
    after = values(m);
    for (int64_t r = 0; r < 9; ++r) {
      for (int64_t c = 0; c < 53; ++c) {
        const auto at = static_cast<size_t>(r * 53 + c);
        const bool was_chosen = std::find(chosen.begin(), chosen.end(), c) != chosen.end();
        EXPECT_EQ(after[at], was_chosen ? 0.0 : before[at]) << r << "," << c;
      }
    }
  }
}

TEST(Columns, BadIndicesAreRefusedByName) {
  const Tensor m = random_matrix(2, 4, DType::F32, 1);
  EXPECT_NE(testing::error_of([&] {
              gather_columns(m, Tensor::from_vector<int32_t>({1, 4}, {2}));
            }).find("column index 4 (position 1) is outside [0, 4)"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              column_abs_sums(Tensor::zeros({3}, DType::F32));
            }).find("expects a matrix"),
            std::string::npos);
}

}  // namespace
}  // namespace lt::ops
