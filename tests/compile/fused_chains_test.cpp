// Each chain the fusion pass fuses, run as a compiled program
// (autograd/fused_program.h), against the same calls run unfused by
// autograd: the output and every input's gradient. The functions are
// traced the way a block stage is (autograd/trace.h), so these also check
// that the trace, the pass and the program keep every call: a dropped or
// misordered call changes the output or a gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/fused_program.h"
#include "autograd/node.h"
#include "col_sum_cases.h"
#include "compile/compiler_info.h"
#include "core/random.h"
#include "support/fused_program_cases.h"
#include "train/train_helpers.h"

namespace lt::autograd {
namespace {

namespace fs = std::filesystem;
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
// `chooser`: the program's (FusedProgram), or none.
void expect_fused_equals_unfused(const Fn& f, const std::vector<Tensor>& values, size_t chains,
                                 int64_t fused_calls, const std::vector<Tensor>& constants = {},
                                 ChainChooser* chooser = nullptr,
                                 compile::KernelCache* kernels = nullptr) {
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
  compile::KernelCache own_cache;
  compile::KernelCache& cache = kernels != nullptr ? *kernels : own_cache;
  std::vector<Tensor> external = traced_in;
  external.insert(external.end(), constants.begin(), constants.end());
  FusedProgram program(trace, external, traced_out, cache, chooser);
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

// f traced on leaves of `values`, as a program (with `chooser`, if any).
std::unique_ptr<FusedProgram> traced_program(const Fn& f, const std::vector<Tensor>& values,
                                             compile::KernelCache& cache, ChainChooser* chooser) {
  CallTrace trace;
  Tensor out;
  const std::vector<Tensor> in = leaves(values);
  {
    TraceScope scope(trace);
    out = f(in);
  }
  return std::make_unique<FusedProgram>(trace, in, out, cache, chooser);
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
  // GPT-2's MLP half-block's inputs (gpt2_mlp_program_case's order): x of
  // [batch, seq, width], the LayerNorm's weight and bias, and the two
  // linears' weights and biases (width -> 2 width -> width).
  std::vector<Tensor> gpt2_mlp_values(int64_t batch, int64_t seq, int64_t width) {
    return {randn({batch, seq, width}),
            randn({width}, 0.5),
            randn({width}, 0.5),
            randn({2 * width, width}, 0.2),
            randn({2 * width}),
            randn({width, 2 * width}, 0.2),
            randn({width})};
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
  expect_fused_equals_unfused(f, gpt2_mlp_values(3, 29, 24), 3, 5);
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

// A chooser whose times are given: a chain holding the call `slow_compiled`
// is faster as calls, every other compiled; it counts what it was asked to
// time.
class GivenTimes : public ChainChooser {
 public:
  GivenTimes(compile::KernelCache& cache, std::string slow_compiled, std::string machine = "m")
      : ChainChooser(cache, std::move(machine)), slow_(std::move(slow_compiled)) {}
  int measured = 0;

 protected:
  ChainTimes measure(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                     const std::vector<CallAgain>&, Device) override {
    ++measured;
    bool slow = false;
    for (int32_t m : plan.chains[static_cast<size_t>(chain)].nodes) {
      slow = slow || graph.nodes[static_cast<size_t>(m)].fn == slow_;
    }
    return {slow ? 2.0 : 1.0, 1.5};
  }

 private:
  std::string slow_;
};

// GPT-2's MLP half-block (three chains: the LayerNorm; the first bias with
// the GELU; the second bias with the residual add) where the bias + GELU
// chain is slower compiled: it runs as its calls, its bias back in its
// linear, and the program still gives autograd's output and gradients.
TEST_F(FusedChains, AChainFasterAsCallsRunsAsItsCallsWithItsBiasInItsLinear) {
  const Fn f = compile::testing::gpt2_mlp_program_case().f;
  const std::vector<Tensor> values = gpt2_mlp_values(3, 29, 24);
  compile::KernelCache cache;
  GivenTimes chooser(cache, "gelu_tanh");
  // Two chains of 3 calls (LayerNorm; bias_add + add), where all three
  // fuse 5.
  expect_fused_equals_unfused(f, values, 2, 3, {}, &chooser, &cache);
  EXPECT_EQ(chooser.measured, 3);
  const ChainChoiceStats stats = chooser.stats();
  EXPECT_EQ(stats.measured, 3);
  EXPECT_EQ(stats.compiled, 2);
  EXPECT_EQ(stats.as_calls, 1);

  const std::unique_ptr<FusedProgram> program = traced_program(f, values, cache, &chooser);
  EXPECT_EQ(chooser.measured, 3) << "a chain class is timed once a process";
  EXPECT_EQ(program->chains_run_as_calls(), 1);
  int bias_adds = 0, biased_linears = 0;
  for (const CallNode& n : program->graph().nodes) {
    bias_adds += n.fn == "bias_add";
    biased_linears += n.fn == "linear" && n.inputs.size() == 3 && n.inputs[2] >= 0;
  }
  EXPECT_EQ(bias_adds, 1);       // the second linear's, in its chain
  EXPECT_EQ(biased_linears, 1);  // the first, as traced
}

// A rotary chain is not timed (its kernel graph reads the f64 tables as
// f32, no chain_kernel_graph): it runs compiled beside a chain the chooser
// sends to calls.
TEST_F(FusedChains, ARotaryChainRunsCompiledBesideChosenChains) {
  const RopeTable table = make_rope_table(8, 16, 10000.0);
  Fn f = [table](const std::vector<Tensor>& in) {
    return scale(rotary_embedding(in[0], table), 2.0);
  };
  compile::KernelCache cache;
  GivenTimes chooser(cache, "scale");
  expect_fused_equals_unfused(f, {randn({2, 5, 3, 8})}, 1, 1, {table.cos, table.sin}, &chooser,
                              &cache);
  EXPECT_EQ(chooser.measured, 1);  // the scale's chain alone
  EXPECT_EQ(chooser.stats().as_calls, 1);
}

// The choices are kept in the cache folder: a second chooser there reads
// them without timing; another machine times its own; a damaged entry is
// timed again, not trusted.
TEST_F(FusedChains, ChainChoicesAreKeptBesideTheKernels) {
  const Fn f = compile::testing::gpt2_mlp_program_case().f;
  const std::vector<Tensor> values = gpt2_mlp_values(2, 5, 16);
  train::testing::TempDir dir("chain_choice");
  compile::KernelCache cache(dir.path().string());
  const auto build = [&](ChainChooser& chooser) {
    return traced_program(f, values, cache, &chooser)->chains_run_as_calls();
  };
  GivenTimes first(cache, "gelu_tanh");
  EXPECT_EQ(build(first), 1);
  EXPECT_EQ(first.measured, 3);
  std::vector<fs::path> entries;
  for (const fs::directory_entry& e : fs::directory_iterator(dir.path())) {
    if (e.path().extension() == ".choice") entries.push_back(e.path());
  }
  ASSERT_EQ(entries.size(), 3u);

  GivenTimes second(cache, "no chain holds this");  // would choose otherwise if it timed
  EXPECT_EQ(build(second), 1);
  EXPECT_EQ(second.measured, 0);
  EXPECT_EQ(second.stats().from_disk, 3);

  GivenTimes elsewhere(cache, "no chain holds this", "another GPU");
  EXPECT_EQ(build(elsewhere), 0);
  EXPECT_EQ(elsewhere.measured, 3);

  for (const fs::path& entry : entries) {
    std::string bytes;
    {
      std::ifstream in(entry, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    bytes[bytes.size() - 2] ^= 0x20;  // the choice's text, under the checksum
    std::ofstream(entry, std::ios::binary | std::ios::trunc) << bytes;
  }
  GivenTimes third(cache, "no chain holds this");
  EXPECT_EQ(build(third), 0);
  EXPECT_EQ(third.measured, 3);
}

// A chain that cannot be timed (here: no kernel, as on a GPU machine
// without MLIR whose folder lacks it) runs as its calls, and the failure
// is neither kept nor hidden.
class FailingTimes : public ChainChooser {
 public:
  using ChainChooser::ChainChooser;

 protected:
  ChainTimes measure(const CallGraph&, const FusionPlan&, int32_t, const std::vector<CallAgain>&,
                     Device) override {
    throw Error("no kernel for this chain");
  }
};

TEST_F(FusedChains, AChainThatCannotBeTimedRunsAsItsCalls) {
  Fn f = [](const std::vector<Tensor>& in) {
    return layer_norm(add(in[0], in[1]), in[2], in[3], 1e-5);
  };
  train::testing::TempDir dir("chain_choice_fails");
  compile::KernelCache cache(dir.path().string());
  FailingTimes chooser(cache, "m");
  expect_fused_equals_unfused(f,
                              {randn({4, 24}), randn({4, 24}), randn({24}, 0.5), randn({24}, 0.5)},
                              0, 0, {}, &chooser, &cache);
  EXPECT_EQ(chooser.stats().first_failure, "no kernel for this chain");
  for (const fs::directory_entry& e : fs::directory_iterator(dir.path())) {
    EXPECT_NE(e.path().extension(), ".choice") << e.path();
  }
}

// The real timing, on the CPU: both ways run (forward and backward), and
// the choice is the faster one. Which is faster is not asserted.
class RecordedTimes : public ChainChooser {
 public:
  using ChainChooser::ChainChooser;
  std::vector<ChainTimes> times;

 protected:
  ChainTimes measure(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                     const std::vector<CallAgain>& again, Device device) override {
    times.push_back(ChainChooser::measure(graph, plan, chain, again, device));
    return times.back();
  }
};

TEST_F(FusedChains, TimesEachChainBothWaysAndKeepsTheFaster) {
  const Fn f = compile::testing::gpt2_mlp_program_case().f;
  const std::vector<Tensor> values = gpt2_mlp_values(3, 29, 24);
  compile::KernelCache cache;
  RecordedTimes chooser(cache, "cpu");
  const std::unique_ptr<FusedProgram> program = traced_program(f, values, cache, &chooser);
  ASSERT_EQ(chooser.times.size(), 3u) << chooser.stats().first_failure;
  int64_t slower_compiled = 0;
  for (const ChainTimes& t : chooser.times) {
    EXPECT_GT(t.compiled_ms, 0);
    EXPECT_GT(t.calls_ms, 0);
    slower_compiled += t.compiled_ms > t.calls_ms;
  }
  EXPECT_EQ(program->chains_run_as_calls(), slower_compiled);
  EXPECT_EQ(chooser.stats().as_calls, slower_compiled);
}

}  // namespace
}  // namespace lt::autograd
