#pragma once
// Kernel graphs with col_sum outputs (compile/graph.h) for the GPU tests of
// the ColSums form (tests/gpu/compiled_kernels_gpu_test.cpp), listed once so
// that GpuKernelPrebuild.* compiles the same graphs ahead for the GPU
// machine, whose build has no MLIR. Each is run on several shapes: rows
// that are one, a few, not a multiple of a block's rows, and many; columns
// fewer than a warp, GPT-2's 768, not a multiple of 8, and more than one
// tile (compile/gpu_mlir.h).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "autograd/fused_chain.h"
#include "autograd/fused_program.h"
#include "autograd/trace.h"
#include "compile/chains.h"
#include "compile/gradient.h"
#include "compile/graph.h"
#include "core/random.h"
#include "support/fused_program_cases.h"

namespace lt::compile::testing {

// GPT-2's MLP chain, a linear's bias add then GELU (tanh), as the fusion
// pass builds it (autograd/fused_chain.h), and its backward as the pass
// compiles it: dx in `dtype`, the bias's gradient a col sum.
inline KernelGraph bias_gelu_backward(DType dtype) {
  autograd::CallGraph calls;
  for (const Shape& shape : {Shape{4, 8}, Shape{8}, Shape{4, 8}, Shape{4, 8}}) {
    calls.shapes.push_back(shape);
    calls.dtypes.push_back(dtype);
    calls.used_after.push_back(false);
  }
  calls.nodes.push_back({"bias_add", {0, 1}, 2, {}});
  calls.nodes.push_back({"gelu_tanh", {2}, 3, {}});
  calls.used_after[3] = true;
  const KernelGraph forward = autograd::chain_kernel_graph(calls, autograd::plan_fusion(calls), 0);
  return gradient_graph(forward, {true, true}, GradientStorage::AsTheForward);
}

// Every part of the form at once: a pitched input, a row reduction, a row
// output, a full output and two col sums (one of a value the full output
// shares).
inline KernelGraph mixed_col_sums() {
  KernelGraph g;
  const Value x = g.mapped_input(DType::BF16, RowMap{.pitch = 2});
  const Value w = g.input(ShapeClass::Col, DType::BF16);
  const Value r = g.input(ShapeClass::Row, DType::F32);
  const Value y = g.add(g.mul(g.exp(g.sub(x, g.row_max(x))), w), r);
  g.output(y, DType::BF16);
  g.output(g.row_sum(y), DType::F32);
  g.output(g.col_sum(y), DType::F32);
  g.output(g.col_sum(g.mul(x, x)), DType::F32);
  return g;
}

struct ColSumCase {
  std::string name;
  KernelGraph graph;
  std::vector<std::pair<int64_t, int64_t>> shapes;  // rows, cols
};

inline std::vector<ColSumCase> col_sum_cases() {
  std::vector<ColSumCase> cases;
  for (DType dtype : {DType::BF16, DType::F32}) {
    const std::string suffix = dtype == DType::BF16 ? " bf16" : " f32";
    // The float64 reference keeps every node's values (16 bytes an
    // element each), so the large row counts go with few columns.
    cases.push_back(
        {"bias + gelu backward" + suffix,
         bias_gelu_backward(dtype),
         {{1, 768}, {7, 50}, {1000, 768}, {16384, 128}, {16389, 50}, {0, 768}, {100, 2049}}});
    cases.push_back({"layer_norm backward" + suffix,
                     gradient_graph(layer_norm_forward(dtype, 1e-5), {true, true, true}),
                     {{1, 768}, {7, 50}, {1000, 771}, {16389, 50}, {33, 4100}}});
    cases.push_back({"residual_rms_norm backward" + suffix,
                     gradient_graph(residual_rms_norm_forward(dtype, 1e-5), {true, true, true}),
                     {{7, 771}, {1000, 768}}});
  }
  cases.push_back({"mixed col sums",
                   mixed_col_sums(),
                   {{1, 50}, {7, 768}, {7, 1025}, {1000, 771}, {40, 4300}}});
  return cases;
}

// GPT-2's MLP half-block as autograd calls: a LayerNorm's weight and
// bias, the first linear's bias with the GELU, and the second's with the
// residual add, so that each of its three chains sums [cols] gradients in
// its backward kernel (tests/gpu/fused_programs_gpu_test.cpp runs it on
// the GPU against autograd's hand-written kernels).
inline autograd::testing::FusedProgramCase gpt2_mlp_program_case() {
  const int64_t width = 256;
  return {"GPT-2 MLP with LayerNorm and biases",
          [](const std::vector<Tensor>& in) {
            const Tensor& x = in[0];
            const Tensor normed = lt::layer_norm(x, in[1], in[2], 1e-5);
            const Tensor h = lt::gelu_tanh(lt::linear(normed, in[3], in[4]));
            return lt::add(x, lt::linear(h, in[5], in[6]));
          },
          {{2, 64, width},
           {width},
           {width},
           {2 * width, width},
           {2 * width},
           {width, 2 * width},
           {width}},
          {1.0, 0.5, 0.5, 0.06, 0.5, 0.04, 0.5},
          {}};
}

// Its chains' forward and backward kernel graphs, traced in `dtype` on
// the CPU with every input requiring a gradient (for the GPU machine's
// prebuilt folder).
inline std::vector<KernelGraph> gpt2_mlp_program_graphs(DType dtype) {
  const autograd::testing::FusedProgramCase c = gpt2_mlp_program_case();
  Generator gen(1);
  std::vector<Tensor> inputs;
  for (const Shape& shape : c.input_shapes) {
    Tensor t = Tensor::randn(shape, gen, DType::F32).to(dtype);
    t.set_requires_grad(true);
    inputs.push_back(t);
  }
  autograd::CallTrace trace;
  Tensor out;
  {
    autograd::TraceScope scope(trace);
    out = c.f(inputs);
  }
  return autograd::program_kernel_graphs(trace, inputs, out);
}

}  // namespace lt::compile::testing
