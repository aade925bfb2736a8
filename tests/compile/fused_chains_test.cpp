// Each chain the fusion pass fuses, run as a compiled program
// (autograd/fused_program.h), against the same calls run unfused by
// autograd: the output and every input's gradient. The functions are
// traced the way a block stage is (autograd/trace.h), so these also check
// that the trace, the pass and the program keep every call: a dropped or
// misordered call changes the output or a gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/fused_program.h"
#include "autograd/node.h"
#include "col_sum_cases.h"
#include "compile/compiler_info.h"
#include "core/random.h"
#include "support/fused_program_cases.h"

namespace lt::autograd {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

using testing::leaves;
using testing::output_and_grads;

void expect_close(const Tensor& fused, const Tensor& unfused, double tolerance,
                  const std::string& what) {
  ASSERT_TRUE(fused.defined() && unfused.defined()) << what;
  ASSERT_EQ(fused.shape(), unfused.shape()) << what;
  const std::vector<double> a = fused.to(DType::F64).to_vector<double>();
  const std::vector<double> b = unfused.to(DType::F64).to_vector<double>();
  double scale = 0;
  for (double v : b) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tolerance * (scale + 1e-30)) << what << " element " << i;
  }
}

// f(values) unfused, and as a program traced from one call of f; the
// program must fuse `chains` chains holding `fused_calls` calls.
// `constants`: tensors f reads besides `values` (a rope table), given to
// the program as its further inputs.
void expect_fused_equals_unfused(const Fn& f, const std::vector<Tensor>& values, size_t chains,
                                 int64_t fused_calls, const std::vector<Tensor>& constants = {}) {
  Generator gen(99);
  std::vector<Tensor> eager_in = leaves(values);
  const Tensor eager_out = f(eager_in);
  const Tensor probe = Tensor::randn(eager_out.shape(), gen);
  const std::vector<Tensor> expected = output_and_grads(eager_out, eager_in, probe);

  std::vector<Tensor> traced_in = leaves(values);
  CallTrace trace;
  Tensor traced_out;
  {
    TraceScope scope(trace);
    traced_out = f(traced_in);
  }
  compile::KernelCache cache;
  std::vector<Tensor> external = traced_in;
  external.insert(external.end(), constants.begin(), constants.end());
  FusedProgram program(trace, external, traced_out, cache);
  EXPECT_EQ(program.plan().chains.size(), chains);
  EXPECT_EQ(program.fused_calls(), fused_calls);

  std::vector<Tensor> run_in = leaves(values);
  std::vector<Tensor> run_external = run_in;
  run_external.insert(run_external.end(), constants.begin(), constants.end());
  const std::vector<Tensor> got = output_and_grads(program.run(run_external), run_in, probe);
  // f32 against f32: the ops sum rows in double, the kernels in f32, and
  // the kernels' backward recomputes the forward in another order.
  expect_close(got[0], expected[0], 2e-6, "output");
  for (size_t i = 1; i < got.size(); ++i) {
    expect_close(got[i], expected[i], 2e-5, "gradient of input " + std::to_string(i - 1));
  }
}

class FusedChains : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!compile::compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  }
  Generator gen{5};
  Tensor randn(const Shape& shape, double std = 1.0) {
    return Tensor::randn(shape, gen, DType::F32, std);
  }
};

TEST_F(FusedChains, ResidualAddAndRmsNorm) {
  Fn f = [](const std::vector<Tensor>& in) { return rms_norm(add(in[0], in[1]), in[2], 1e-6); };
  expect_fused_equals_unfused(f, {randn({2, 3, 32}), randn({2, 3, 32}), randn({32}, 0.5)}, 1, 2);
}

TEST_F(FusedChains, ResidualAddAndLayerNorm) {
  Fn f = [](const std::vector<Tensor>& in) {
    return layer_norm(add(in[0], in[1]), in[2], in[3], 1e-5);
  };
  expect_fused_equals_unfused(
      f, {randn({4, 24}), randn({4, 24}), randn({24}, 0.5), randn({24}, 0.5)}, 1, 2);
}

// The chain's tape node is named by its calls, in call order: the class
// LT_OP_PROFILE charges its backward to ("backward fused_chain add+layer_norm").
TEST_F(FusedChains, NamesItsTapeNodeByItsCalls) {
  Fn f = [](const std::vector<Tensor>& in) {
    return layer_norm(add(in[0], in[1]), in[2], in[3], 1e-5);
  };
  const std::vector<Tensor> in =
      leaves({randn({4, 24}), randn({4, 24}), randn({24}, 0.5), randn({24}, 0.5)});
  CallTrace trace;
  Tensor out;
  {
    TraceScope scope(trace);
    out = f(in);
  }
  compile::KernelCache cache;
  FusedProgram program(trace, in, out, cache);
  const Tensor result =
      program.run(leaves({randn({4, 24}), randn({4, 24}), randn({24}, 0.5), randn({24}, 0.5)}));
  ASSERT_NE(result.grad_fn(), nullptr);
  EXPECT_EQ(result.grad_fn()->name, "fused_chain add+layer_norm");
}

TEST_F(FusedChains, SwiGLU) {
  Fn f = [](const std::vector<Tensor>& in) { return swiglu(in[0], in[1]); };
  expect_fused_equals_unfused(f, {randn({3, 5, 40}, 2.0), randn({3, 5, 40})}, 1, 1);
}

TEST_F(FusedChains, GeluTanh) {
  Fn f = [](const std::vector<Tensor>& in) { return gelu_tanh(in[0]); };
  expect_fused_equals_unfused(f, {randn({6, 48}, 2.0)}, 1, 1);
}

// GPT-2's MLP up to the second projection: the bias of the first linear
// and the GELU are one chain; the matmul stays outside.
TEST_F(FusedChains, BiasAndActivation) {
  Fn f = [](const std::vector<Tensor>& in) {
    return linear(gelu_tanh(linear(in[0], in[1], in[2])), in[3]);
  };
  expect_fused_equals_unfused(
      f, {randn({2, 4, 16}), randn({32, 16}, 0.2), randn({32}), randn({16, 32}, 0.2)}, 1, 2);
}

// GPT-2's attention input: the qkv projection's bias would be a chain by
// itself, so its linear keeps it (the GEMM's epilogue adds it and sums its
// gradient): one chain, the LayerNorm, of one call.
TEST_F(FusedChains, LeavesALoneBiasInItsLinear) {
  Fn f = [](const std::vector<Tensor>& in) {
    return matmul(linear(layer_norm(in[0], in[1], in[2], 1e-5), in[3], in[4]), in[5]);
  };
  expect_fused_equals_unfused(f,
                              {randn({2, 4, 16}), randn({16}, 0.5), randn({16}, 0.5),
                               randn({48, 16}, 0.2), randn({48}), randn({48, 8}, 0.2)},
                              1, 1);
}

// GPT-2's MLP half-block on 3 x 29 rows (more than a CPU kernel's few): a
// LayerNorm's weight and bias, the first linear's bias with the GELU, and
// the second's bias with the residual add, so every chain's backward sums
// [cols] gradients in its kernel (compile/graph.h's col_sum).
TEST_F(FusedChains, Gpt2MlpWithLayerNormAndBiases) {
  // The GPU test's function (col_sum_cases.h), on smaller shapes.
  const Fn f = compile::testing::gpt2_mlp_program_case().f;
  expect_fused_equals_unfused(
      f,
      {randn({3, 29, 24}), randn({24}, 0.5), randn({24}, 0.5), randn({48, 24}, 0.2), randn({48}),
       randn({24, 48}, 0.2), randn({24})},
      3, 5);
}

// A whole pre-norm block's elementwise pattern around two matmuls: three
// chains (norm; residual add + norm; residual add) and the residual stream
// read across them.
TEST_F(FusedChains, NormsAndResidualsAroundMatmuls) {
  Fn f = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const Tensor h = add(x, matmul(rms_norm(x, in[1], 1e-6), in[2]));
    return add(h, matmul(silu(rms_norm(h, in[3], 1e-6)), in[4]));
  };
  expect_fused_equals_unfused(f,
                              {randn({2, 3, 16}), randn({16}, 0.5), randn({16, 16}, 0.3),
                               randn({16}, 0.5), randn({16, 16}, 0.3)},
                              3, 5);
}

// RoPE (positions 0..T-1) from a table longer than T, then a scale that
// stays outside its chain (RoPE is a chain of its own).
TEST_F(FusedChains, RotaryEmbedding) {
  const RopeTable table = make_rope_table(8, 16, 10000.0);
  Fn f = [table](const std::vector<Tensor>& in) {
    return scale(rotary_embedding(in[0], table), 2.0);
  };
  expect_fused_equals_unfused(f, {randn({2, 5, 3, 8})}, 2, 2, {table.cos, table.sin});
}

// One head (a model with one key/value head): the tables' row map is the
// identity, so they are read as dense values of x's leading dims.
TEST_F(FusedChains, RotaryEmbeddingOfOneHead) {
  const RopeTable table = make_rope_table(8, 16, 10000.0);
  Fn f = [table](const std::vector<Tensor>& in) {
    return scale(rotary_embedding(in[0], table), 2.0);
  };
  expect_fused_equals_unfused(f, {randn({2, 5, 1, 8})}, 2, 2, {table.cos, table.sin});
}

// A trace that reads a tensor made outside the traced calls cannot be
// replayed: building the program says so instead of replaying stale data.
TEST_F(FusedChains, RefusesATraceThatReadsAnUntracedTensor) {
  const std::vector<Tensor> in = leaves({randn({4, 8})});
  CallTrace trace;
  Tensor out;
  {
    TraceScope scope(trace);
    const Tensor made_outside = in[0].detach().clone();  // not a traced call
    out = add(in[0], made_outside);
  }
  compile::KernelCache cache;
  try {
    FusedProgram program(trace, in, out, cache);
    FAIL() << "built a program from a trace that reads an untraced tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("made outside the traced calls"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lt::autograd
