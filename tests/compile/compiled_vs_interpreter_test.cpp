// Random expression graphs (rapidcheck): the kernel compiled through MLIR
// equals the float64 interpreter within the interpreter's bound on f32
// rounding (compile/interpret.h), times a small factor for libm. The
// graphs hold table lookups too, at computed indices and at u8 codes.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "compile/compiler_info.h"
#include "compile/interpret.h"
#include "compile/jit.h"
#include "compile/jit_harness.h"
#include "core/error.h"
#include "support/random_kernel_chain.h"

namespace lt::compile {
namespace {

constexpr double kUnitRoundoff = 0x1.0p-24;

RC_GTEST_PROP(CompiledKernel, EqualsFloat64InterpreterOnRandomChains, ()) {
  if (!compiler_info().built_in) return;  // covered by CompiledKernel.BuiltIn
  testing::RandomChain chain([](int lo, int hi) { return *rc::gen::inRange(lo, hi); },
                             /*lookups=*/true);
  chain.build();
  const int64_t rows = *rc::gen::inRange<int64_t>(1, 6);
  const int64_t cols = *rc::gen::inRange<int64_t>(1, 65);
  Generator gen(*rc::gen::arbitrary<uint32_t>());
  std::vector<Values> inputs;
  for (const InputSpec& in : chain.graph.inputs()) {
    inputs.push_back(
        testing::draw_values(element_count(in.shape, rows, cols), in.dtype, -2, 2, gen));
  }
  const Reference ref = interpret(chain.graph, rows, cols, inputs);
  const std::unique_ptr<CpuKernel> kernel = compile_cpu(chain.graph);
  const std::vector<Values> got = testing::run_compiled(*kernel, chain.graph, rows, cols, inputs);
  RC_ASSERT(got.size() == ref.outputs.size());
  for (size_t o = 0; o < got.size(); ++o) {
    for (size_t i = 0; i < got[o].size(); ++i) {
      const double want = ref.outputs[o][i];
      RC_ASSERT(std::isfinite(want));
      const double tolerance = kBoundSlack * kUnitRoundoff * ref.rounding_bound[o][i] + 1e-30;
      if (!(std::abs(got[o][i] - want) <= tolerance)) {
        RC_FAIL("output " + std::to_string(o) + " element " + std::to_string(i) + ": compiled " +
                std::to_string(got[o][i]) + ", float64 " + std::to_string(want) + ", tolerance " +
                std::to_string(tolerance) + "\nkernel " + chain.graph.key());
      }
    }
  }
}

TEST(CompiledKernel, BuiltIn) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  EXPECT_FALSE(compiler_info().mlir_version.empty());
}

TEST(CompiledKernel, WithoutMlirCompilingRefusesSayingSo) {
  if (compiler_info().built_in) GTEST_SKIP() << "built with MLIR";
  KernelGraph g;
  g.output(g.exp(g.input(ShapeClass::Full, DType::F32)), DType::F32);
  try {
    compile_cpu(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("built without MLIR"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lt::compile
