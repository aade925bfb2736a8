// compile::gradient_graph against central finite differences, both in
// float64 through the interpreter (compile/interpret.h): the backward
// graphs of RMSNorm (with its residual add), SwiGLU, LayerNorm and GELU
// as the fusion pass writes them (autograd/fused_chain.h), and of every
// elementwise op. Then the compiled backward kernel against the
// interpreter, within the f32 rounding bound.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/fused_chain.h"
#include "compile/chains.h"
#include "compile/compiler_info.h"
#include "compile/gradient.h"
#include "compile/interpret.h"
#include "compile/jit.h"
#include "core/random.h"
#include "jit_harness.h"

namespace lt::compile {
namespace {

constexpr int64_t kRows = 3, kCols = 7;

Values random_values(Generator& gen, ShapeClass shape, double lo, double hi) {
  Values v(static_cast<size_t>(element_count(shape, kRows, kCols)));
  for (double& x : v) x = lo + (hi - lo) * gen.uniform();
  return v;
}

// L(inputs) = sum over outputs o, elements e of probe[o][e] * out[o][e].
double probe_loss(const KernelGraph& g, const std::vector<Values>& in,
                  const std::vector<Values>& probe) {
  const Reference r = interpret(g, kRows, kCols, in);
  double loss = 0;
  for (size_t o = 0; o < r.exact.size(); ++o)
    for (size_t e = 0; e < r.exact[o].size(); ++e) loss += probe[o][e] * r.exact[o][e];
  return loss;
}

// Checks d L / d input against the backward graph, for every input.
void expect_gradient_matches_differences(const KernelGraph& forward, const std::vector<Values>& in,
                                         uint64_t seed) {
  Generator gen(seed);
  std::vector<Values> probe;
  for (const OutputSpec& o : forward.outputs())
    probe.push_back(random_values(gen, forward.node(o.node).shape, -1, 1));
  const KernelGraph backward =
      gradient_graph(forward, std::vector<bool>(forward.inputs().size(), true));
  std::vector<Values> args = in;
  for (const Values& p : probe) args.push_back(p);
  const std::vector<Values> grads = interpret(backward, kRows, kCols, args).exact;
  ASSERT_EQ(grads.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    // Every input's gradient has its shape (a col input's summed over the rows).
    ASSERT_EQ(grads[i].size(), in[i].size()) << "input " << i;
    for (size_t e = 0; e < in[i].size(); ++e) {
      std::vector<Values> plus = in, minus = in;
      const double h = 1e-6 * std::max(1.0, std::abs(in[i][e]));
      plus[i][e] += h;
      minus[i][e] -= h;
      const double numeric =
          (probe_loss(forward, plus, probe) - probe_loss(forward, minus, probe)) / (2 * h);
      const double analytic = grads[i][e];
      EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << "input " << i << " element " << e << " of " << forward.key();
    }
  }
}

// The chain graphs the pass builds, from a hand-written call graph of one chain.
KernelGraph chain_graph(const std::string& fn, const std::vector<bool>& col_inputs,
                        std::vector<double> numbers = {}, bool residual = false) {
  autograd::CallGraph g;
  const Shape full{kRows, kCols}, col{kCols};
  auto value = [&](const Shape& s) {
    g.shapes.push_back(s);
    g.dtypes.push_back(DType::F32);
    g.used_after.push_back(false);
    return static_cast<int32_t>(g.shapes.size() - 1);
  };
  std::vector<int32_t> in;
  for (bool c : col_inputs) in.push_back(value(c ? col : full));
  if (residual) {
    const int32_t r = value(full);
    const int32_t h = value(full);
    g.nodes.push_back({"add", {in[0], r}, h, {}});
    in[0] = h;
  }
  const int32_t out = value(full);
  g.nodes.push_back({fn, in, out, numbers});
  g.used_after[static_cast<size_t>(out)] = true;
  if (residual) g.used_after[static_cast<size_t>(in[0])] = true;  // the residual stream
  const autograd::FusionPlan plan = autograd::plan_fusion(g);
  EXPECT_EQ(plan.chains.size(), 1u);
  return autograd::chain_kernel_graph(g, plan, 0);
}

TEST(GradientGraph, ResidualRmsNormMatchesFiniteDifferences) {
  Generator gen(1);
  const KernelGraph f = chain_graph("rms_norm", {false, true}, {1e-6}, true);
  // Inputs in first-use order: x, residual, weight.
  ASSERT_EQ(f.inputs().size(), 3u);
  expect_gradient_matches_differences(
      f,
      {random_values(gen, ShapeClass::Full, -2, 2), random_values(gen, ShapeClass::Full, -2, 2),
       random_values(gen, ShapeClass::Col, 0.5, 1.5)},
      11);
}

TEST(GradientGraph, SwigluMatchesFiniteDifferences) {
  Generator gen(2);
  const KernelGraph f = chain_graph("swiglu", {false, false});
  expect_gradient_matches_differences(
      f, {random_values(gen, ShapeClass::Full, -4, 4), random_values(gen, ShapeClass::Full, -2, 2)},
      12);
}

TEST(GradientGraph, LayerNormAndGeluMatchFiniteDifferences) {
  Generator gen(3);
  expect_gradient_matches_differences(
      chain_graph("layer_norm", {false, true, true}, {1e-5}),
      {random_values(gen, ShapeClass::Full, -2, 2), random_values(gen, ShapeClass::Col, 0.5, 1.5),
       random_values(gen, ShapeClass::Col, -1, 1)},
      13);
  expect_gradient_matches_differences(chain_graph("gelu_tanh", {false}),
                                      {random_values(gen, ShapeClass::Full, -3, 3)}, 14);
}

// Every differentiable op of the IR once, with row and col operands and a
// value used twice (gradients add up).
TEST(GradientGraph, EveryOpMatchesFiniteDifferences) {
  KernelGraph g;
  const Value a = g.input(ShapeClass::Full, DType::F32);
  const Value b = g.input(ShapeClass::Full, DType::F32);
  const Value r = g.input(ShapeClass::Row, DType::F32);
  const Value c = g.input(ShapeClass::Col, DType::F32);
  const Value positive = g.add(g.mul(b, b), g.constant(0.5));
  Value t = g.add(g.sub(a, r), g.div(g.mul(a, c), positive));
  t = g.add(t, g.max(a, b));
  t = g.add(t, g.select(g.less(a, b), g.exp(a), g.neg(g.tanh(b))));
  t = g.add(t, g.mul(g.abs(a), g.log(positive)));
  t = g.add(t, g.mul(g.sqrt(positive), g.rsqrt(positive)));
  t = g.add(t, g.mul(g.sigmoid(a), g.erf(b)));
  t = g.add(t, g.cast(g.row_max(a), DType::F32));
  g.output(t, DType::F32);
  g.output(g.row_mean(g.mul(t, t)), DType::F32);
  Generator gen(4);
  expect_gradient_matches_differences(
      g,
      {random_values(gen, ShapeClass::Full, -2, 2), random_values(gen, ShapeClass::Full, -2, 2),
       random_values(gen, ShapeClass::Row, -1, 1), random_values(gen, ShapeClass::Col, -1, 1)},
      15);
}

// The compiled backward kernel (f32) against the interpreter (float64).
TEST(GradientGraph, CompiledBackwardEqualsTheInterpreter) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  Generator gen(6);
  const KernelGraph f = chain_graph("rms_norm", {false, true}, {1e-6}, true);
  const KernelGraph backward = gradient_graph(f, {true, true, true});
  std::vector<Values> args{
      random_values(gen, ShapeClass::Full, -2, 2), random_values(gen, ShapeClass::Full, -2, 2),
      random_values(gen, ShapeClass::Col, 0.5, 1.5), random_values(gen, ShapeClass::Full, -1, 1),
      random_values(gen, ShapeClass::Full, -1, 1)};
  // Stored as f32 first, so both sides read the same inputs.
  for (Values& v : args)
    for (double& x : v) x = static_cast<float>(x);
  const Reference want = interpret(backward, kRows, kCols, args);
  const std::vector<Values> got =
      testing::run_compiled(*compile_cpu(backward), backward, kRows, kCols, args);
  for (size_t o = 0; o < got.size(); ++o) {
    for (size_t e = 0; e < got[o].size(); ++e) {
      const double bound = want.rounding_bound[o][e] * kBoundSlack * 0x1.0p-24;
      EXPECT_NEAR(got[o][e], want.outputs[o][e], bound) << "output " << o << " element " << e;
    }
  }
}

// GradientStorage::AsTheForward on bf16 chains: the Full inputs' gradients
// come out in bf16 and the output gradients go in as bf16, and every value
// is the f32-storage graph's (fed the same gradients upcast) with its Full
// gradients rounded to bf16: bit for bit, so the fusion pass's backward
// gives what it gave before, without the casts around the kernel.
TEST(GradientGraph, GradientsInTheForwardsDtypesAreTheF32GraphsRounded) {
  if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  const auto bf16 = [](double x) { return static_cast<double>(bf16_to_f32(f32_to_bf16(x))); };
  const std::vector<std::pair<const char*, KernelGraph>> forwards = {
      {"swiglu", swiglu_forward(DType::BF16)},
      {"gelu_tanh", gelu_tanh_forward(DType::BF16)},
      {"residual_rms_norm", residual_rms_norm_forward(DType::BF16, 1e-6)},
      {"layer_norm", layer_norm_forward(DType::BF16, 1e-5)}};
  for (const auto& [name, f] : forwards) {
    SCOPED_TRACE(name);
    const std::vector<bool> all(f.inputs().size(), true);
    const KernelGraph stored = gradient_graph(f, all, GradientStorage::AsTheForward);
    const KernelGraph wide = gradient_graph(f, all);
    Generator gen(21);
    std::vector<Values> args;
    for (const InputSpec& in : f.inputs()) args.push_back(random_values(gen, in.shape, -2, 2));
    for (const OutputSpec& o : f.outputs())
      args.push_back(random_values(gen, f.node(o.node).shape, -1, 1));
    for (size_t a = 0; a < args.size(); ++a) {
      const DType dtype = stored.inputs()[a].dtype;
      EXPECT_EQ(dtype, a < f.inputs().size() ? f.inputs()[a].dtype
                                             : f.outputs()[a - f.inputs().size()].dtype);
      for (double& x : args[a]) x = dtype == DType::BF16 ? bf16(x) : static_cast<float>(x);
    }
    const std::vector<Values> got =
        testing::run_compiled(*compile_cpu(stored), stored, kRows, kCols, args);
    const std::vector<Values> want =
        testing::run_compiled(*compile_cpu(wide), wide, kRows, kCols, args);
    ASSERT_EQ(got.size(), want.size());
    size_t narrowed = 0;
    for (size_t o = 0; o < got.size(); ++o) {
      const bool narrow = stored.outputs()[o].dtype == DType::BF16;
      narrowed += narrow;
      for (size_t e = 0; e < got[o].size(); ++e)
        EXPECT_EQ(got[o][e], narrow ? bf16(want[o][e]) : want[o][e])
            << "output " << o << " element " << e;
    }
    EXPECT_GT(narrowed, 0u) << "no gradient is stored in bf16";
  }
}

}  // namespace
}  // namespace lt::compile
