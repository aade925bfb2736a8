// The compiled GELU (tanh form; compile/chains.h writes it as
// x sigmoid(2u), whose sigmoid the GPU computes with PTX's ex2.approx and
// rcp.approx) on the GPU, forward and backward, in each elementwise form
// (one element a thread, four, and the training path's packed eight), at
// every bf16 input and a dense f32 sweep with the extremes, against the
// float64 interpreter within its rounding bound and against GPT-2's
// formula (tests/compile/gelu_sweep.h; the CPU's is
// tests/compile/gelu_accuracy_test.cpp). Its kernels are in the prebuilt
// folder's list (tests/support/gpu_kernel_cases.h's named chains).
#include <gtest/gtest.h>

#include <cstdio>

#include "compile/gelu_sweep.h"
#include "compile/gpu_kernel.h"
#include "compile/gpu_kernel_cache.h"
#include "core/error.h"
#include "core/tensor.h"
#include "gpu_test_support.h"
#include "support/gpu_kernel_cases.h"

namespace lt::compile {
namespace {

std::vector<Values> run_on_gpu(GpuKernelCache& kernels, const KernelGraph& graph, int64_t rows,
                               int64_t cols, const std::vector<Values>& inputs) {
  std::vector<Tensor> device_inputs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    device_inputs.push_back(
        Tensor::from_doubles(inputs[k], {rows, cols}, graph.inputs()[k].dtype).to(Device::cuda(0)));
  }
  std::vector<Values> out;
  for (const Tensor& t : call_gpu(kernels, graph, device_inputs)) {
    out.push_back(t.contiguous().to(Device::cpu()).to_doubles());
  }
  return out;
}

TEST(GeluAccuracyGpu, EveryFormIsWithinTheInterpretersBoundEverywhere) {
  LT_REQUIRE_GPU();
  const std::string folder = testing::gpu_test_kernel_folder();
  GpuKernelCache one(folder);
  GpuKernelCache four(folder, testing::four_elements_target());
  GpuKernelCache packed(folder, testing::packed_eight_target());
  const std::vector<std::pair<const char*, GpuKernelCache*>> forms = {
      {"one a thread", &one}, {"four a thread", &four}, {"packed eight", &packed}};
  for (const auto& [form, kernels] : forms) {
    for (const testing::GeluCase& c : testing::gelu_cases()) {
      SCOPED_TRACE(c.name + ", " + form);
      try {
        const testing::GeluSweepResult r = testing::expect_gelu_within_bound(
            c, [&](const KernelGraph& graph, int64_t rows, int64_t cols,
                   const std::vector<Values>& inputs) {
              return run_on_gpu(*kernels, graph, rows, cols, inputs);
            });
        std::printf(
            "%s, %s: %lld values, worst error %.3g of the bound (at x = %.9g), %lld not "
            "the nearest bf16\n",
            c.name.c_str(), form, static_cast<long long>(r.checked), r.worst_ratio, r.worst_at,
            static_cast<long long>(r.not_nearest_bf16));
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace lt::compile
