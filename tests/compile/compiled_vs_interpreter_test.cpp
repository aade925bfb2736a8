// Random expression graphs (rapidcheck): the kernel compiled through MLIR
// equals the float64 interpreter within the interpreter's bound on f32
// rounding (compile/interpret.h), times a small factor for libm. The
// graphs hold table lookups too, at computed indices and at u8 codes.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "autograd/fused_rope.h"
#include "col_sum_cases.h"
#include "compile/compiler_info.h"
#include "compile/interpret.h"
#include "compile/jit.h"
#include "compile/jit_harness.h"
#include "core/error.h"
#include "support/gpu_kernel_cases.h"
#include "support/random_kernel_chain.h"

namespace lt::compile {
namespace {

constexpr double kUnitRoundoff = 0x1.0p-24;

// The compiled kernel of `graph` on random inputs against the interpreter
// (a rapidcheck failure names the element and the kernel).
void check_compiled_against_interpreter(const KernelGraph& graph, int64_t rows, int64_t cols) {
  Generator gen(*rc::gen::arbitrary<uint32_t>());
  std::vector<Values> inputs;
  for (const InputSpec& in : graph.inputs()) {
    inputs.push_back(testing::draw_values(input_count(in, rows, cols), in.dtype, -2, 2, gen));
  }
  const Reference ref = interpret(graph, rows, cols, inputs);
  const std::unique_ptr<CpuKernel> kernel = compile_cpu(graph);
  const std::vector<Values> got = testing::run_compiled(*kernel, graph, rows, cols, inputs);
  RC_ASSERT(got.size() == ref.outputs.size());
  for (size_t o = 0; o < got.size(); ++o) {
    RC_ASSERT(got[o].size() == ref.outputs[o].size());
    for (size_t i = 0; i < got[o].size(); ++i) {
      const double want = ref.outputs[o][i];
      RC_ASSERT(std::isfinite(want));
      const double tolerance = kBoundSlack * kUnitRoundoff * ref.rounding_bound[o][i] + 1e-30;
      if (!(std::abs(got[o][i] - want) <= tolerance)) {
        RC_FAIL("output " + std::to_string(o) + " element " + std::to_string(i) + ": compiled " +
                std::to_string(got[o][i]) + ", float64 " + std::to_string(want) + ", tolerance " +
                std::to_string(tolerance) + "\nkernel " + graph.key());
      }
    }
  }
}

// A random chain (testing::RandomChain's options) on up to 5 x 64.
void check_random_chain(bool lookups, bool halves) {
  testing::RandomChain chain([](int lo, int hi) { return *rc::gen::inRange(lo, hi); }, lookups,
                             halves);
  chain.build();
  const int64_t rows = *rc::gen::inRange<int64_t>(1, 6);
  const int64_t cols = *rc::gen::inRange<int64_t>(1, 65);
  check_compiled_against_interpreter(chain.graph, rows, cols);
}

RC_GTEST_PROP(CompiledKernel, EqualsFloat64InterpreterOnRandomChains, ()) {
  if (!compiler_info().built_in) return;  // covered by CompiledKernel.BuiltIn
  check_random_chain(/*lookups=*/true, /*halves=*/false);
}

// f16 storage and casts, and int8 values times a scale (RandomChain's
// `halves`).
RC_GTEST_PROP(CompiledKernel, EqualsFloat64InterpreterOnRandomChainsOfF16AndInt8, ()) {
  if (!compiler_info().built_in) return;  // covered by CompiledKernel.BuiltIn
  check_random_chain(/*lookups=*/false, /*halves=*/true);
}

// The named f16 chains and int8 quantization (tests/support/
// gpu_kernel_cases.h), on small shapes.
RC_GTEST_PROP(CompiledKernel, F16AndInt8NamedChainsEqualFloat64Interpreter, ()) {
  if (!compiler_info().built_in) return;
  std::vector<testing::GpuKernelCase> cases;
  for (testing::GpuKernelCase& c : testing::named_chain_cases()) {
    const std::string& name = c.name;
    if (name.find(" f16") != std::string::npos || name.find("int8") != std::string::npos) {
      cases.push_back(std::move(c));
    }
  }
  RC_ASSERT(cases.size() == size_t{7});
  const testing::GpuKernelCase& c = cases[*rc::gen::inRange<size_t>(0, cases.size())];
  check_compiled_against_interpreter(c.graph, *rc::gen::inRange<int64_t>(1, 6),
                                     *rc::gen::inRange<int64_t>(1, 65));
}

// The same chains with one or two col sums (graph.h's ColSum) of their
// full values added as outputs: the CPU kernel's loop over the rows in
// order, with the full and row outputs beside it; no rows sum to zeros.
RC_GTEST_PROP(CompiledKernel, ColSumsEqualFloat64InterpreterOnRandomChains, ()) {
  if (!compiler_info().built_in) return;
  testing::RandomChain chain([](int lo, int hi) { return *rc::gen::inRange(lo, hi); },
                             /*lookups=*/true);
  chain.build();
  std::vector<int32_t> full;
  for (size_t id = 0; id < chain.graph.nodes().size(); ++id) {
    if (chain.graph.nodes()[id].shape == ShapeClass::Full) full.push_back(static_cast<int32_t>(id));
  }
  const int sums = *rc::gen::inRange(1, 3);
  for (int k = 0; k < sums; ++k) {
    const size_t pick = *rc::gen::inRange<size_t>(0, full.size());
    chain.graph.output(chain.graph.col_sum(Value{full[pick]}), DType::F32);
  }
  const int64_t rows = *rc::gen::inRange<int64_t>(0, 40);
  const int64_t cols = *rc::gen::inRange<int64_t>(1, 65);
  check_compiled_against_interpreter(chain.graph, rows, cols);
}

// The GPU tests' col-sum graphs (col_sum_cases.h) on the CPU: the norms'
// backward graphs, and a pitched input and a row output beside the sums.
RC_GTEST_PROP(CompiledKernel, ColSumCasesEqualFloat64Interpreter, ()) {
  if (!compiler_info().built_in) return;
  static const std::vector<testing::ColSumCase> cases = testing::col_sum_cases();
  const testing::ColSumCase& c = cases[*rc::gen::inRange<size_t>(0, cases.size())];
  const int64_t rows = *rc::gen::inRange<int64_t>(0, 70);
  const int64_t cols = *rc::gen::inRange<int64_t>(1, 40);
  check_compiled_against_interpreter(c.graph, rows, cols);
}

// Row maps (compile/graph.h): a pitched input, a table read once per row
// group and period, a dense row input and a pitched output, in an
// elementwise pass and in a reduction pass; and RoPE's graph with its
// gradient (autograd/fused_rope.h), on row counts that do not fill the
// last group.
TEST(CompiledKernel, RowMappedBuffersEqualFloat64Interpreter) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  KernelGraph g;
  {
    const Value x = g.mapped_input(DType::BF16, RowMap{.pitch = 3});
    const Value table = g.mapped_input(DType::F32, RowMap{.group = 2, .period = 3});
    const Value row = g.input(ShapeClass::Row, DType::F32);
    const Value y = g.add(g.mul(x, table), row);
    g.output_pitched(y, DType::BF16, 2);
    g.output(g.row_sum(g.mul(y, table)), DType::F32);
    g.output(g.sub(y, g.row_max(x)), DType::F32);
  }
  const KernelGraph rope = autograd::rope_kernel_graph(DType::BF16, 3);
  const KernelGraph rope_backward = autograd::rope_gradient_graph(rope);
  Generator gen(7);
  for (const KernelGraph* graph : {static_cast<const KernelGraph*>(&g), &rope, &rope_backward}) {
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 5}, {13, 16}}) {
      SCOPED_TRACE(graph->key() + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
      std::vector<Values> inputs;
      for (const InputSpec& in : graph->inputs()) {
        inputs.push_back(testing::draw_values(input_count(in, rows, cols), in.dtype, -2, 2, gen));
      }
      const Reference ref = interpret(*graph, rows, cols, inputs);
      const std::unique_ptr<CpuKernel> kernel = compile_cpu(*graph);
      const std::vector<Values> got = testing::run_compiled(*kernel, *graph, rows, cols, inputs);
      ASSERT_EQ(got.size(), ref.outputs.size());
      for (size_t o = 0; o < got.size(); ++o) {
        ASSERT_EQ(got[o].size(), ref.outputs[o].size());
        for (size_t i = 0; i < got[o].size(); ++i) {
          const double tolerance = kBoundSlack * kUnitRoundoff * ref.rounding_bound[o][i] + 1e-30;
          ASSERT_NEAR(got[o][i], ref.outputs[o][i], tolerance)
              << "output " << o << " element " << i;
        }
      }
    }
  }
  // The map is part of the key: the same expression read densely is another kernel.
  KernelGraph dense;
  dense.output(dense.exp(dense.input(ShapeClass::Full, DType::F32)), DType::F32);
  KernelGraph pitched;
  pitched.output(pitched.exp(pitched.mapped_input(DType::F32, RowMap{.pitch = 2})), DType::F32);
  EXPECT_NE(dense.key(), pitched.key());
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
