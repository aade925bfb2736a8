// tests/support/unfused_graphs.h: the one-kernel-per-op sequence that the
// chain benchmark times as "unfused" computes the chain, with one kernel per
// value it must keep. Each kernel runs through the float64 interpreter on
// the values the earlier ones stored, and the sequence's outputs are
// compared with the fused graph's, interpreted the same way. With the
// values stored in f32 the only difference is each value's f32 rounding;
// stored in the chain's dtype (bf16), each is rounded to bf16 on the way,
// as an eager framework stores it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "compile/compiler_info.h"
#include "compile/gpu_kernel.h"
#include "compile/interpret.h"
#include "compile/jit.h"
#include "support/gpu_kernel_cases.h"
#include "support/unfused_graphs.h"

namespace lt::compile {
namespace {

bool row_mapped(const KernelGraph& graph) {
  return std::any_of(graph.inputs().begin(), graph.inputs().end(),
                     [](const InputSpec& in) { return !in.map.identity(); });
}

// Counted here from the definition, apart from the code under test: the
// non-input nodes the outputs depend on that are full, row reductions or
// outputs, plus one cast per output that stores an earlier output's node
// in another dtype.
size_t expected_kernels(const KernelGraph& g) {
  std::set<int32_t> needed;
  std::vector<int32_t> work;
  for (const OutputSpec& out : g.outputs()) work.push_back(out.node);
  while (!work.empty()) {
    const int32_t id = work.back();
    work.pop_back();
    if (!needed.insert(id).second) continue;
    for (int32_t operand : {g.node(id).a, g.node(id).b, g.node(id).c}) {
      if (operand >= 0) work.push_back(operand);
    }
  }
  size_t count = 0;
  for (int32_t id : needed) {
    const Node& n = g.node(id);
    const bool output = std::any_of(g.outputs().begin(), g.outputs().end(),
                                    [&](const OutputSpec& o) { return o.node == id; });
    count += n.op != OpKind::Input && (n.shape == ShapeClass::Full || is_reduction(n.op) || output);
  }
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    for (size_t p = 0; p < o; ++p) {
      if (g.outputs()[p].node == g.outputs()[o].node) {
        count += g.outputs()[p].dtype != g.outputs()[o].dtype;
        break;
      }
    }
  }
  return count;
}

// RoPE's row-mapped tables and the int8 codes' chains are not timed per op.
bool is_int8(const testing::GpuKernelCase& c) {
  return c.name.rfind("int8", 0) == 0;
}

// How far apart an output stored as `dtype` may be from another order's:
// a bf16 or f16 one may round the other way (about one ulp), an f32 one
// `f32` apart.
double half_relative(DType dtype, double f32) {
  return dtype == DType::BF16 ? 8e-3 : dtype == DType::F16 ? 1e-3 : f32;
}

// Each input node's values, in (0.05, 1) and stored in its dtype.
std::map<int32_t, Values> draw_inputs(const KernelGraph& graph, int64_t rows, int64_t cols,
                                      uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> uniform(0.05, 1.0);
  std::map<int32_t, Values> out;
  for (int32_t id = 0; id < static_cast<int32_t>(graph.nodes().size()); ++id) {
    const Node& n = graph.node(id);
    if (n.op != OpKind::Input) continue;
    Values v(static_cast<size_t>(input_count(graph.inputs()[n.input_index], rows, cols)));
    for (double& x : v) {
      x = uniform(gen);
      if (n.dtype == DType::BF16) x = round_to_bf16(x);
      if (n.dtype == DType::F16) x = round_to_f16(x);
    }
    out[id] = v;
  }
  return out;
}

// The sequence's outputs, each kernel interpreted on the values stored before.
std::vector<Values> run_sequence(const testing::UnfusedSequence& seq,
                                 std::map<int32_t, Values> values, int64_t rows, int64_t cols) {
  for (const testing::UnfusedKernel& k : seq.kernels) {
    EXPECT_EQ(k.graph.outputs().size(), 1u);
    std::vector<Values> args;
    for (int32_t source : k.sources) args.push_back(values.at(source));
    values[k.node] = interpret(k.graph, rows, cols, args).outputs.at(0);
  }
  std::vector<Values> outputs;
  for (int32_t id : seq.outputs) outputs.push_back(values.at(id));
  return outputs;
}

TEST(UnfusedGraphs, OneKernelPerOpComputesTheNamedChains) {
  const int64_t rows = 7, cols = 33;
  int checked = 0;
  for (const testing::GpuKernelCase& c : testing::named_chain_cases()) {
    if (row_mapped(c.graph) || is_int8(c)) continue;  // not timed unfused
    SCOPED_TRACE(c.name);
    const std::map<int32_t, Values> inputs_by_node = draw_inputs(c.graph, rows, cols, 5);
    std::vector<Values> inputs;
    for (const auto& [id, v] : inputs_by_node) inputs.push_back(v);
    const Reference fused = interpret(c.graph, rows, cols, inputs);
    // Values in f32: within f32 rounding of the fused graph's outputs
    // (which round only where the chain stores them).
    const testing::UnfusedSequence in_f32 = testing::one_kernel_per_op(c.graph, DType::F32);
    EXPECT_EQ(in_f32.kernels.size(), expected_kernels(c.graph));
    const std::vector<Values> got = run_sequence(in_f32, inputs_by_node, rows, cols);
    ASSERT_EQ(got.size(), fused.outputs.size());
    for (size_t o = 0; o < got.size(); ++o) {
      const double relative = half_relative(c.graph.outputs()[o].dtype, 1e-5);
      for (size_t i = 0; i < got[o].size(); ++i) {
        const double want = fused.outputs[o][i];
        // A bf16 or f16 output may round the other way from a value 1e-5 apart.
        const double tolerance = relative * std::max(1.0, std::abs(want));
        ASSERT_NEAR(got[o][i], want, tolerance) << "output " << o << " element " << i;
      }
    }
    // Values in the chain's dtype (what the benchmark runs): the same
    // kernels, so the same count, and every output finite.
    const testing::UnfusedSequence in_chain_dtype = testing::one_kernel_per_op(c.graph);
    EXPECT_EQ(in_chain_dtype.kernels.size(), in_f32.kernels.size());
    for (const Values& out : run_sequence(in_chain_dtype, inputs_by_node, rows, cols)) {
      for (double x : out) ASSERT_TRUE(std::isfinite(x));
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

// The benchmark runs each kernel compiled, on tensors, through
// run_unfused_kernel. Some kernels read only per-row values (a norm's saved
// rsqrt from its stored mean square): compile::call cannot tell their cols.
// Compiled on the CPU, in f32 values, against the interpreted sequence.
TEST(UnfusedGraphs, EveryKernelRunsCompiledOnTensors) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  const int64_t rows = 5, cols = 24;
  int rows_only = 0;
  for (const testing::GpuKernelCase& c : testing::named_chain_cases()) {
    if (row_mapped(c.graph) || is_int8(c)) continue;
    SCOPED_TRACE(c.name);
    const std::map<int32_t, Values> values = draw_inputs(c.graph, rows, cols, 9);
    std::map<int32_t, Tensor> tensors;
    for (const auto& [id, v] : values) {
      const Node& n = c.graph.node(id);
      tensors[id] = Tensor::from_doubles(v, testing::class_shape(n.shape, rows, cols), n.dtype);
    }
    const testing::UnfusedSequence seq = testing::one_kernel_per_op(c.graph, DType::F32);
    const std::vector<Values> want = run_sequence(seq, values, rows, cols);
    for (const testing::UnfusedKernel& k : seq.kernels) {
      std::vector<Tensor> args;
      for (int32_t source : k.sources) args.push_back(tensors.at(source));
      rows_only += !args.empty() && std::all_of(args.begin(), args.end(), [&](const Tensor& t) {
        return t.dim() == 1 && t.size(0) == rows;
      });
      const DeviceKernel kernel{Device::cpu(), compile_cpu(k.graph), nullptr};
      tensors[k.node] = testing::run_unfused_kernel(kernel, k, args, rows, cols);
    }
    for (size_t o = 0; o < want.size(); ++o) {
      const Values got = tensors.at(seq.outputs[o]).to_doubles();
      ASSERT_EQ(got.size(), want[o].size());
      const double relative = half_relative(c.graph.outputs()[o].dtype, 1e-4);
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[o][i], relative * std::max(1.0, std::abs(want[o][i])))
            << "output " << o << " element " << i;
      }
    }
  }
  EXPECT_GT(rows_only, 0);  // the case this test is for
}

}  // namespace
}  // namespace lt::compile
