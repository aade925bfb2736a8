// LayerNorm backward's one-pass kernel (ops/cuda/norm_layer_backward.cuh),
// which takes rows of up to 1024 bf16 or 512 f32 values, against the CPU
// backward in float64 on the same values (that one is checked against
// central differences in tests/ops/norm_test.cpp). Relative error norm
// 1e-3 for f32, 1e-2 for bf16, as in kernels_gpu_test.cpp; and two runs
// give the same bits (the weight and bias sums are in a fixed order).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/random.h"
#include "core/tensor.h"
#include "gpu_test_support.h"
#include "ops/norm.h"
#include "support/gradcheck.h"
#include "support/scoped_env.h"

namespace lt {
namespace {

const Device kGpu = Device::cuda(0);

::testing::AssertionResult near(const Tensor& actual, const Tensor& expected, double tol,
                                const char* what) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << what << ": " << actual.str() << " vs " << expected.str();
  }
  const double err = testing::relative_error_norm(actual.to_doubles(), expected.to_doubles());
  std::printf("[rel-err] %s %s %.3e\n", what, dtype_name(actual.dtype()), err);
  if (!(err < tol)) {
    return ::testing::AssertionFailure()
           << what << ": relative error norm " << err << " >= " << tol;
  }
  return ::testing::AssertionSuccess();
}

TEST(LayerNormFusedGpu, BackwardMatchesFloat64) {
  const lt::testing::ScopedEnv one_pass("LT_LAYER_NORM_BACKWARD", "one_pass");
  LT_REQUIRE_GPU();
  Generator gen(95);
  struct Case {
    DType dtype;
    int64_t rows, cols;
    bool need_dx;
  };
  // GPT-2's 768 (3 packs a lane), a narrow row (1 pack, most lanes idle),
  // f32 at its widest (4 packs), and the weight gradient without dx.
  // 4099 rows: warps and blocks that end part-way.
  for (const Case c : {Case{DType::BF16, 4099, 768, true}, Case{DType::BF16, 333, 64, true},
                       Case{DType::F32, 4099, 512, true}, Case{DType::BF16, 1000, 1024, false}}) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " " + std::to_string(c.rows) + " x " +
                 std::to_string(c.cols));
    Tensor x = Tensor::randn({c.rows, c.cols}, gen, c.dtype, 2.0);
    Tensor dy = Tensor::randn({c.rows, c.cols}, gen, c.dtype);
    Tensor w = Tensor::randn({c.cols}, gen, c.dtype);
    Tensor b = Tensor::randn({c.cols}, gen, c.dtype);
    // Statistics from the GPU forward, used by both backward passes.
    const ops::LayerNormOutput fwd = ops::layer_norm(x.to(kGpu), w.to(kGpu), b.to(kGpu), 1e-5);
    const ops::LayerNormGrads want =
        ops::layer_norm_backward(dy.to(DType::F64), x.to(DType::F64), w.to(DType::F64),
                                 fwd.mean.to(Device::cpu(), DType::F64),
                                 fwd.rstd.to(Device::cpu(), DType::F64), c.need_dx, true, true);
    auto run = [&] {
      return ops::layer_norm_backward(dy.to(kGpu), x.to(kGpu), w.to(kGpu), fwd.mean, fwd.rstd,
                                      c.need_dx, true, true);
    };
    const ops::LayerNormGrads got = run();
    const double tol = c.dtype == DType::BF16 ? 1e-2 : 1e-3;
    if (c.need_dx) {
      EXPECT_TRUE(near(got.dx, want.dx, tol, "dx"));
    } else {
      EXPECT_FALSE(got.dx.defined());
    }
    EXPECT_TRUE(near(got.dweight, want.dweight, tol, "dweight"));
    EXPECT_TRUE(near(got.dbias, want.dbias, tol, "dbias"));
    const ops::LayerNormGrads again = run();
    EXPECT_EQ(again.dweight.to_doubles(), got.dweight.to_doubles());
    EXPECT_EQ(again.dbias.to_doubles(), got.dbias.to_doubles());
  }
}

}  // namespace
}  // namespace lt
