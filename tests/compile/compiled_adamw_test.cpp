// The AdamW update compiled by the fusion compiler (optim/compiled_adamw.h)
// against optim's own kernel (optim/adamw_kernel.h, the scalar path that
// optim::AdamW's SIMD paths equal bit for bit) and against the update in
// float64. Same IEEE operations in the same order, so the compiled kernel
// is expected to equal optim's bit for bit; float64 bounds how far both
// are from the exact update.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "compile/compiler_info.h"
#include "core/random.h"
#include "optim/compiled_adamw.h"

namespace lt::optim {
namespace {

struct State {
  std::vector<float> p, m, v;
  std::vector<float> g;
};

State random_state(int64_t n, uint64_t seed) {
  Generator gen(seed);
  State s;
  for (int64_t i = 0; i < n; ++i) {
    s.p.push_back(static_cast<float>(gen.normal()));
    s.g.push_back(static_cast<float>(gen.normal() * 0.1));
    s.m.push_back(static_cast<float>(gen.normal() * 0.01));
    s.v.push_back(static_cast<float>(gen.uniform() * 1e-3));
  }
  return s;
}

class CompiledAdamW : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!compile::compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  }
};

// Several steps with changing scalars (one kernel for all of them), n not a
// multiple of the kernel's 16 lanes, bf16 copy written in the same pass.
TEST_P(CompiledAdamW, EqualsOptimsKernelBitForBitAndFloat64Closely) {
  const DType grad_dtype = GetParam();
  const int64_t n = 1000 + 3;
  State ref = random_state(n, 4);
  if (grad_dtype == DType::BF16)
    for (float& g : ref.g) g = bf16_to_f32(f32_to_bf16(g));
  const Tensor p = Tensor::from_vector(ref.p, {n}), m = Tensor::from_vector(ref.m, {n}),
               v = Tensor::from_vector(ref.v, {n});
  const Tensor grad = Tensor::from_vector(ref.g, {n}).to(grad_dtype);
  const Tensor copy = Tensor::zeros({n}, DType::BF16);
  std::vector<double> p64(ref.p.begin(), ref.p.end()), m64(ref.m.begin(), ref.m.end()),
      v64(ref.v.begin(), ref.v.end());
  std::vector<uint16_t> shadow(static_cast<size_t>(n));
  compile::KernelCache cache;
  for (int64_t t = 1; t <= 3; ++t) {
    const AdamWScalars s =
        adamw_scalars(1e-2 * static_cast<double>(t), 0.9, 0.999, 1e-8, 0.1, 0.5, t);
    compiled_adamw_update(cache, s, p, grad, m, v, copy);
    if (grad_dtype == DType::BF16) {
      std::vector<BFloat16> g16(static_cast<size_t>(n));
      for (size_t i = 0; i < g16.size(); ++i) g16[i].bits = f32_to_bf16(ref.g[i]);
      adamw_update(s, ref.p.data(), g16.data(), ref.m.data(), ref.v.data(), shadow.data(), n);
    } else {
      adamw_update(s, ref.p.data(), ref.g.data(), ref.m.data(), ref.v.data(), shadow.data(), n);
    }
    // float64, from the same f32 scalars.
    for (size_t i = 0; i < p64.size(); ++i) {
      const double g = static_cast<double>(ref.g[i]) * s.grad_scale;
      m64[i] = double{s.beta1} * m64[i] + double{s.one_minus_beta1} * g;
      v64[i] = double{s.beta2} * v64[i] + double{s.one_minus_beta2} * g * g;
      p64[i] = p64[i] * s.decay_factor +
               s.neg_step_size * m64[i] / (std::sqrt(v64[i]) / s.bias_correction2_sqrt + s.eps);
    }
  }
  const std::vector<float> p_got = p.to_vector<float>(), m_got = m.to_vector<float>(),
                           v_got = v.to_vector<float>();
  const Tensor copy_bits = copy;
  size_t differing = 0;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    differing += std::memcmp(&p_got[i], &ref.p[i], 4) != 0;
    differing += std::memcmp(&m_got[i], &ref.m[i], 4) != 0;
    differing += std::memcmp(&v_got[i], &ref.v[i], 4) != 0;
    EXPECT_EQ(copy_bits.data<BFloat16>()[i].bits, shadow[i]) << "bf16 copy " << i;
    // A few f32 roundings per step over 3 steps, relative to the step size.
    EXPECT_NEAR(p_got[i], p64[i], 1e-6 * std::abs(p64[i]) + 1e-7) << "param " << i;
    EXPECT_NEAR(m_got[i], m64[i], 1e-5 * std::abs(m64[i]) + 1e-12) << "exp_avg " << i;
    EXPECT_NEAR(v_got[i], v64[i], 1e-5 * std::abs(v64[i]) + 1e-15) << "exp_avg_sq " << i;
  }
  EXPECT_EQ(differing, 0u) << "elements of p, m, v not bitwise equal to optim's kernel";
  EXPECT_EQ(cache.stats().compiled, 1) << "one kernel for every step's scalars";
}

INSTANTIATE_TEST_SUITE_P(GradDtypes, CompiledAdamW, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lt::optim
