// The compiled GELU (tanh form; compile/chains.h writes it as
// x sigmoid(2u)) on the CPU, forward and backward, at every bf16 input and
// a dense f32 sweep with the extremes, against the float64 interpreter
// within its rounding bound and against GPT-2's formula
// (tests/compile/gelu_sweep.h; the GPU's is tests/gpu/gelu_accuracy_gpu_test.cpp).
#include <gtest/gtest.h>

#include <cstdio>

#include "compile/compiler_info.h"
#include "compile/gelu_sweep.h"
#include "compile/jit.h"
#include "compile/jit_harness.h"

namespace lt::compile {
namespace {

TEST(GeluAccuracy, CompiledForTheCpuIsWithinTheInterpretersBoundEverywhere) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  for (const testing::GeluCase& c : testing::gelu_cases()) {
    SCOPED_TRACE(c.name);
    const std::unique_ptr<CpuKernel> kernel = compile_cpu(c.graph);
    const testing::GeluSweepResult r =
        testing::expect_gelu_within_bound(c, [&](const KernelGraph& graph, int64_t rows,
                                                 int64_t cols, const std::vector<Values>& inputs) {
          return testing::run_compiled(*kernel, graph, rows, cols, inputs);
        });
    std::printf(
        "%s: %lld values, worst error %.3g of the bound (at x = %.9g), %lld not the "
        "nearest bf16, %lld held to the formula\n",
        c.name.c_str(), static_cast<long long>(r.checked), r.worst_ratio, r.worst_at,
        static_cast<long long>(r.not_nearest_bf16), static_cast<long long>(r.formula_checked));
  }
}

}  // namespace
}  // namespace lt::compile
