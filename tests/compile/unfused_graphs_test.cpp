// tests/support/unfused_graphs.h: the one-kernel-per-op sequence that the
// chain benchmark times as "unfused" computes the chain. Each kernel is run
// through the float64 interpreter on the values the earlier ones stored,
// and the graph's outputs are compared with the fused graph's, interpreted
// the same way: for f32 chains the only difference is each intermediate's
// f32 rounding; for bf16 chains each intermediate is rounded to bf16, as an
// eager framework stores it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "compile/interpret.h"
#include "support/gpu_kernel_cases.h"
#include "support/unfused_graphs.h"

namespace lt::compile {
namespace {

bool row_mapped(const KernelGraph& graph) {
  return std::any_of(graph.inputs().begin(), graph.inputs().end(),
                     [](const InputSpec& in) { return !in.map.identity(); });
}

TEST(UnfusedGraphs, OneKernelPerOpComputesTheNamedChains) {
  const int64_t rows = 7, cols = 33;
  int checked = 0;
  for (const testing::GpuKernelCase& c : testing::named_chain_cases()) {
    if (row_mapped(c.graph)) continue;  // RoPE: not timed unfused
    SCOPED_TRACE(c.name);
    std::mt19937_64 gen(5);
    std::uniform_real_distribution<double> uniform(0.05, 1.0);
    std::map<int32_t, Values> values;
    std::vector<Values> inputs;
    for (int32_t id = 0; id < static_cast<int32_t>(c.graph.nodes().size()); ++id) {
      const Node& n = c.graph.node(id);
      if (n.op != OpKind::Input) continue;
      Values v(static_cast<size_t>(input_count(c.graph.inputs()[n.input_index], rows, cols)));
      for (double& x : v) x = n.dtype == DType::BF16 ? round_to_bf16(uniform(gen)) : uniform(gen);
      values[id] = v;
      inputs.push_back(v);
    }
    const testing::UnfusedSequence seq = testing::one_kernel_per_op(c.graph);
    const std::vector<testing::UnfusedKernel>& kernels = seq.kernels;
    // At least one kernel per full value and per reduction (and one per
    // row statistic the chain outputs).
    int64_t full_or_reduced = 0;
    for (const Node& n : c.graph.nodes()) {
      full_or_reduced +=
          n.op != OpKind::Input &&
          (n.shape == ShapeClass::Full || n.op == OpKind::RowSum || n.op == OpKind::RowMax);
    }
    EXPECT_GE(static_cast<int64_t>(kernels.size()), full_or_reduced);
    for (const testing::UnfusedKernel& k : kernels) {
      ASSERT_EQ(k.graph.outputs().size(), 1u);
      std::vector<Values> args;
      for (int32_t source : k.sources) args.push_back(values.at(source));
      values[k.node] = interpret(k.graph, rows, cols, args).outputs.at(0);
    }
    const Reference fused = interpret(c.graph, rows, cols, inputs);
    const bool bf16 = c.name.find("bf16") != std::string::npos;
    for (size_t o = 0; o < c.graph.outputs().size(); ++o) {
      const Values& want = fused.outputs[o];
      const Values& got = values.at(seq.outputs[o]);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const double tolerance = (bf16 ? 0.1 : 1e-4) * std::max(1.0, std::abs(want[i]));
        ASSERT_NEAR(got[i], want[i], tolerance) << "output " << o << " element " << i;
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

}  // namespace
}  // namespace lt::compile
