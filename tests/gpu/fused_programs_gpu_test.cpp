// The fusion pass on a CUDA device (issue 24): functions traced on CUDA
// tensors run as fused programs whose chains are GPU kernels
// (compile/gpu_kernel.h), against the same calls run unfused by autograd
// on the GPU (the hand-written CUDA kernels): the output and every input's
// gradient. The kernels come from $LT_GPU_KERNELS, filled ahead where MLIR
// is (GpuKernelPrebuild.*, which lists fused_program_kernel_graphs and
// compile/col_sum_cases.h's GPT-2 MLP).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/fused_program.h"
#include "autograd/trace.h"
#include "compile/col_sum_cases.h"
#include "compile/kernel_cache.h"
#include "core/random.h"
#include "gpu_test_support.h"
#include "support/fused_program_cases.h"
#include "support/gpu_kernel_cases.h"

namespace lt::autograd {
namespace {

using testing::leaves;
using testing::output_and_grads;

// Largest difference relative to the largest magnitude of `expected`.
double relative_error(const Tensor& got, const Tensor& expected) {
  const std::vector<double> a = got.to(Device::cpu()).to_doubles();
  const std::vector<double> b = expected.to(Device::cpu()).to_doubles();
  EXPECT_EQ(a.size(), b.size());
  double scale = 1e-30, worst = 0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst / scale;
}

// Each case run fused on the GPU (its kernels from the prebuilt folder)
// against the same calls unfused: the output and every input's gradient.
void expect_fused_equals_unfused(const std::vector<testing::FusedProgramCase>& cases, DType dtype) {
  // bf16: both sides round each call's result to bf16, in different
  // orders (and the gradients sum rows in another order); f32: only the
  // order of the sums differs.
  const double tolerance = dtype == DType::BF16 ? 3e-2 : 2e-4;
  compile::KernelCache cache(compile::testing::gpu_test_kernel_folder());
  for (const testing::FusedProgramCase& c : cases) {
    SCOPED_TRACE(c.name);
    Generator gen(7);
    std::vector<Tensor> values;
    for (size_t i = 0; i < c.input_shapes.size(); ++i) {
      values.push_back(Tensor::randn(c.input_shapes[i], gen, DType::F32, c.input_stds[i])
                           .to(Device::cuda(0), dtype));
    }
    std::vector<Tensor> constants;
    for (const Tensor& t : c.constants) constants.push_back(t.to(Device::cuda(0)));
    const auto with_constants = [&](std::vector<Tensor> in) {
      in.insert(in.end(), constants.begin(), constants.end());
      return in;
    };

    std::vector<Tensor> eager_in = leaves(values);
    const Tensor eager_out = c.f(with_constants(eager_in));
    const Tensor probe =
        Tensor::randn(eager_out.shape(), gen, DType::F32).to(Device::cuda(0), dtype);
    const std::vector<Tensor> expected = output_and_grads(eager_out, eager_in, probe);

    std::vector<Tensor> traced_in = leaves(values);
    CallTrace trace;
    Tensor traced_out;
    {
      TraceScope scope(trace);
      traced_out = c.f(with_constants(traced_in));
    }
    std::unique_ptr<FusedProgram> program;
    try {
      program = std::make_unique<FusedProgram>(trace, with_constants(traced_in), traced_out, cache);
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    EXPECT_GE(program->plan().chains.size(), 1u);
    std::vector<Tensor> run_in = leaves(values);
    const std::vector<Tensor> got =
        output_and_grads(program->run(with_constants(run_in)), run_in, probe);
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(got[0].device(), Device::cuda(0));
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(got[i].defined() && expected[i].defined()) << i;
      EXPECT_LE(relative_error(got[i], expected[i]), tolerance)
          << (i == 0 ? std::string("output") : "gradient of input " + std::to_string(i - 1));
    }
  }
  EXPECT_GE(cache.gpu().stats().loaded_from_disk + cache.gpu().stats().compiled, 1);
}

class FusedProgramsGpu : public ::testing::TestWithParam<DType> {};

TEST_P(FusedProgramsGpu, EqualUnfusedOnTheGpu) {
  LT_REQUIRE_GPU();
  expect_fused_equals_unfused(testing::fused_program_cases(), GetParam());
}

// GPT-2's MLP half-block: its LayerNorm's weight and bias and its two
// biases' gradients summed in the backward kernels (the ColSums form,
// compile/gpu_mlir.h), against autograd's hand-written CUDA kernels.
TEST_P(FusedProgramsGpu, Gpt2MlpWithBiasesEqualsUnfused) {
  LT_REQUIRE_GPU();
  expect_fused_equals_unfused({compile::testing::gpt2_mlp_program_case()}, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedProgramsGpu, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lt::autograd
