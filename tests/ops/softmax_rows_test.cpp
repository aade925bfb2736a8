// The CPU cross-entropy's row kernels (ops/cpu/softmax_rows.h), in every
// build this CPU can run, against float64 sums of libm's exp and an exact
// max, over row lengths that leave every tail length of the 8 and 16 lanes.
#include "ops/cpu/softmax_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

namespace lt::ops::cpu {
namespace {

// The builds this CPU runs; the others are skipped, and said to be.
std::vector<RowIsa> supported() {
  std::vector<RowIsa> out;
  const char* names[] = {"baseline", "avx2", "avx512"};
  for (RowIsa isa : {RowIsa::kBaseline, RowIsa::kAvx2, RowIsa::kAvx512}) {
    const bool runs = row_isa_supported(isa);
    std::printf("softmax rows, %s build: %s\n", names[static_cast<int>(isa)],
                runs ? "tested" : "not tested (this CPU lacks it)");
    if (runs) out.push_back(isa);
  }
  return out;
}

TEST(SoftmaxRows, EveryBuildMatchesFloat64) {
  std::mt19937 gen(7);
  std::normal_distribution<float> logit(0.0f, 4.0f);
  for (RowIsa isa : supported()) {
    const RowKernels& k = row_kernels(isa);
    for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 33, 1023, 1024, 1025, 5000}) {
      SCOPED_TRACE(testing::Message() << "isa " << static_cast<int>(isa) << ", n " << n);
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = logit(gen);
      float want_max = -std::numeric_limits<float>::infinity();
      for (float v : x) want_max = std::max(want_max, v);
      EXPECT_EQ(k.max(x.data(), n), want_max);  // a max is exact
      double want_sum = 0;
      // The kernels exponentiate the f32 difference, as the f32 code they
      // replace did: the reference takes the same difference.
      for (float v : x) want_sum += std::exp(static_cast<double>(v - want_max));
      const double got = k.sum_exp_shifted(x.data(), want_max, n);
      // f32 lanes over blocks of 1024 and a ~2 ulp exp: well inside 1e-6.
      EXPECT_NEAR(got, want_sum, 1e-6 * std::max(1.0, want_sum));
      std::vector<float> out(x.size());
      const float shift = want_max + 0.5f, scale = 0.25f;
      k.exp_shifted_scaled(x.data(), shift, scale, out.data(), n);
      for (int64_t j = 0; j < n; ++j) {
        const double e = std::exp(static_cast<double>(x[j] - shift)) * scale;
        ASSERT_NEAR(out[j], e, 5e-7 * e + 1e-37) << j;  // ~2 ulp exp, 0.5 ulp scaling
      }
    }
  }
}

// A NaN anywhere makes the row's sum NaN (as libm's exp would) and is
// passed over by the max, as std::max(m, x) does; infinities clamp.
TEST(SoftmaxRows, NanAndInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (RowIsa isa : supported()) {
    const RowKernels& k = row_kernels(isa);
    for (int64_t where : {0, 5, 20, 36}) {  // in a vector lane and in the tail
      std::vector<float> row(37, 0.25f);
      row[static_cast<size_t>(where)] = nan;
      EXPECT_TRUE(std::isnan(k.sum_exp_shifted(row.data(), 0.0f, 37))) << where;
      EXPECT_EQ(k.max(row.data(), 37), 0.25f) << where;
    }
    std::vector<float> row(40, -inf);
    EXPECT_EQ(k.max(row.data(), 40), -inf);
    EXPECT_LT(k.sum_exp_shifted(row.data(), 0.0f, 40), 1e-35);
    row[33] = 3.0f;
    EXPECT_EQ(k.max(row.data(), 40), 3.0f);
  }
  EXPECT_EQ(row_kernels(best_row_isa()).max, row_kernels().max);
}

}  // namespace
}  // namespace lt::ops::cpu
