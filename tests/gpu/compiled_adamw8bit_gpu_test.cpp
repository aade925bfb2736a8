// The 8-bit AdamW update compiled by the fusion compiler, run on CUDA as a
// cubin (optim/compiled_adamw8bit.h), against optim's own block update
// (adamw8bit_update_block, which AdamW8bit's CUDA kernel equals bit for
// bit; tests/compile/compiled_adamw8bit_test.cpp holds the CPU kernel to
// it and to float64). The GPU's division and square root need not round
// as the CPU's do, so: parameters within 1e-6 of the largest of the old
// value, the new one and the update (a few f32 ulps of the update), the
// bf16 copy within one bf16 step, the scales within 1e-6 relative, and the
// codes equal but for at most 1 in 100, one rank off (a moment that moved
// by an ulp across a rounding midpoint). The kernel
// comes from $LT_GPU_KERNELS (GpuKernelPrebuild.* fills it where MLIR is).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "compile/kernel_cache.h"
#include "gpu_test_support.h"
#include "optim/compiled_adamw8bit.h"
#include "support/adamw8bit_states.h"
#include "support/gpu_kernel_cases.h"

namespace lt::optim {
namespace {

using testing::States8bit;

class CompiledAdamW8bitGpu : public ::testing::TestWithParam<DType> {};

TEST_P(CompiledAdamW8bitGpu, MatchesOptimsBlockUpdate) {
  LT_REQUIRE_GPU();
  const DType grad_dtype = GetParam();
  const int64_t block = 2048, n = 40 * block + 1000;  // AdamW8bit's default block size
  States8bit s = testing::random_states_8bit(n, block, 5);
  if (grad_dtype == DType::BF16)
    for (float& g : s.g) g = bf16_to_f32(f32_to_bf16(g));
  compile::KernelCache cache(compile::testing::gpu_test_kernel_folder());
  int64_t codes = 0, off = 0;
  for (int64_t t = 1; t <= 2; ++t) {
    const AdamWScalars sc =
        adamw_scalars(1e-2 * static_cast<double>(t), 0.9, 0.999, 1e-8, 0.1, 0.5, t + 3);
    States8bit ref = s;
    testing::optim_update_8bit(sc, block, grad_dtype, ref);
    const States8bit got = testing::updated_8bit(
        s, grad_dtype, Device::cuda(0),
        [&](const Tensor& p, const Tensor& g, const Tensor& mc, const Tensor& ms, const Tensor& vc,
            const Tensor& vs, const Tensor& copy) {
          compiled_adamw8bit_update(cache, sc, block, p, g, mc, ms, vc, vs, copy);
        });
    for (size_t i = 0; i < got.p.size(); ++i) {
      // A few ulps of the largest term: the update itself can be far larger
      // than the new value (an old value of 0.5 moved to -0.01: the H200
      // gave 2^-24 off there, one ulp of the update's 0.51).
      const double update = std::abs(static_cast<double>(s.p[i]) - ref.p[i]);
      const double scale = std::max(
          {std::abs(static_cast<double>(ref.p[i])), std::abs(static_cast<double>(s.p[i])), update});
      ASSERT_NEAR(got.p[i], ref.p[i], 1e-6 * scale + 1e-9) << "step " << t << " element " << i;
      const float copy = bf16_to_f32(got.bf16_copy[i]), want = bf16_to_f32(ref.bf16_copy[i]);
      ASSERT_LE(std::abs(copy - want), std::abs(want) / 128) << "bf16 copy " << i;
      for (auto [code, want_code] :
           {std::pair{got.m_codes[i], ref.m_codes[i]}, {got.v_codes[i], ref.v_codes[i]}}) {
        ++codes;
        if (code == want_code) continue;
        ++off;
        EXPECT_EQ(std::abs(int{code} - int{want_code}), 1) << "element " << i;
      }
    }
    for (size_t b = 0; b < got.m_scales.size(); ++b) {
      EXPECT_NEAR(got.m_scales[b], ref.m_scales[b], 1e-6 * ref.m_scales[b]) << "block " << b;
      EXPECT_NEAR(got.v_scales[b], ref.v_scales[b], 1e-6 * ref.v_scales[b]) << "block " << b;
    }
    s = got;
  }
  EXPECT_LE(off * 100, codes) << off << " of " << codes << " codes differ";
  std::printf("%lld of %lld codes one rank from optim's\n", static_cast<long long>(off),
              static_cast<long long>(codes));
}

INSTANTIATE_TEST_SUITE_P(GradDtypes, CompiledAdamW8bitGpu,
                         ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lt::optim
