// Random expression graphs (rapidcheck): the kernel compiled through MLIR
// equals the float64 interpreter within the interpreter's bound on f32
// rounding (compile/interpret.h), times a small factor for libm.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "compile/compiler_info.h"
#include "compile/interpret.h"
#include "compile/jit.h"
#include "compile/jit_harness.h"
#include "core/error.h"

namespace lt::compile {
namespace {

constexpr double kUnitRoundoff = 0x1.0p-24;

// Generated values stay within this magnitude, so f32 never overflows and
// the first-order bound stays meaningful.
constexpr double kMaxMagnitude = 1e6;

struct Candidate {
  Value value;
  double magnitude;  // an upper bound on |value|
};

// Builds a random chain: inputs of random shape classes and dtypes, then ops
// drawn over the values so far. Ops whose raw domain is limited get
// operands that keep them in it (log(1 + x^2), a / (1 + b^2), exp of a
// tanh or of x - row_max(x)), so every value is finite.
class RandomChain {
 public:
  KernelGraph graph;

  void build() {
    const int inputs = *rc::gen::inRange(1, 4);
    for (int i = 0; i < inputs; ++i) {
      const ShapeClass shape =
          i == 0 ? ShapeClass::Full
                 : *rc::gen::element(ShapeClass::Full, ShapeClass::Row, ShapeClass::Col);
      const DType dtype = *rc::gen::element(DType::F32, DType::BF16);
      pool_.push_back({graph.input(shape, dtype), 2.0});
    }
    const int ops = *rc::gen::inRange(1, 12);
    for (int i = 0; i < ops; ++i) add_op();
    // One to three outputs, the last full or row value always among them
    // (col values cannot be outputs; the first input is full).
    for (auto it = pool_.rbegin(); it != pool_.rend(); ++it) {
      const ShapeClass s = graph.node(it->value.id).shape;
      if (s == ShapeClass::Full || s == ShapeClass::Row) {
        graph.output(it->value, *rc::gen::element(DType::F32, DType::BF16));
        break;
      }
    }
    const int extra = *rc::gen::inRange(0, 3);
    for (int i = 0; i < extra; ++i) {
      const Candidate& c = pick();
      const ShapeClass s = graph.node(c.value.id).shape;
      if (s == ShapeClass::Full || s == ShapeClass::Row) {
        graph.output(c.value, *rc::gen::element(DType::F32, DType::BF16));
      }
    }
  }

 private:
  const Candidate& pick() {
    return pool_[static_cast<size_t>(*rc::gen::inRange<size_t>(0, pool_.size()))];
  }
  const Candidate* pick_full() {
    std::vector<const Candidate*> full;
    for (const Candidate& c : pool_) {
      if (graph.node(c.value.id).shape == ShapeClass::Full) full.push_back(&c);
    }
    if (full.empty()) return nullptr;
    return full[static_cast<size_t>(*rc::gen::inRange<size_t>(0, full.size()))];
  }
  Value one_plus_square(const Candidate& c) {
    return graph.add(graph.constant(1.0), graph.mul(c.value, c.value));
  }
  void push(Value v, double magnitude) {
    if (magnitude <= kMaxMagnitude) pool_.push_back({v, magnitude});
  }

  void add_op() {
    const Candidate a = pick();
    const Candidate b = pick();
    const double ma = a.magnitude, mb = b.magnitude;
    switch (*rc::gen::inRange(0, 21)) {
      case 0:
        push(graph.add(a.value, b.value), ma + mb);
        break;
      case 1:
        push(graph.sub(a.value, b.value), ma + mb);
        break;
      case 2:
        push(graph.mul(a.value, b.value), ma * mb);
        break;
      case 3:
        push(graph.div(a.value, one_plus_square(b)), ma);
        break;
      case 4:
        push(graph.max(a.value, b.value), std::max(ma, mb));
        break;
      case 5:
        push(graph.neg(a.value), ma);
        break;
      case 6:
        push(graph.exp(graph.tanh(a.value)), std::exp(1.0));
        break;
      case 7:
        push(graph.log(one_plus_square(a)), std::log1p(ma * ma));
        break;
      case 8:
        push(graph.tanh(a.value), 1.0);
        break;
      case 9:
        push(graph.rsqrt(one_plus_square(a)), 1.0);
        break;
      case 10:
        push(graph.sigmoid(a.value), 1.0);
        break;
      case 11:
        push(graph.cast(a.value, DType::BF16), ma * 1.01);
        break;
      case 12: {
        const double c = *rc::gen::inRange(-200, 201) / 100.0;
        push(graph.mul(a.value, graph.constant(c)), ma * std::abs(c));
        break;
      }
      case 13:
        if (const Candidate* f = pick_full()) push(graph.row_sum(f->value), 64 * f->magnitude);
        break;
      case 14:
        if (const Candidate* f = pick_full()) push(graph.row_max(f->value), f->magnitude);
        break;
      case 15:  // the softmax pattern: exp(x - row_max(x)) / row_sum(...)
        if (const Candidate* f = pick_full()) {
          Value e = graph.exp(graph.sub(f->value, graph.row_max(f->value)));
          push(graph.div(e, graph.row_sum(e)), 1.0);
        }
        break;
      case 16:  // the RMSNorm pattern: x * rsqrt(mean(x^2) + eps)
        if (const Candidate* f = pick_full()) {
          Value ms = graph.row_mean(graph.mul(f->value, f->value));
          push(graph.mul(f->value, graph.rsqrt(graph.add(ms, graph.constant(1e-5)))),
               f->magnitude / std::sqrt(1e-5));
        }
        break;
      case 17:
        push(graph.abs(a.value), ma);
        break;
      case 18:
        push(graph.erf(a.value), 1.0);
        break;
      case 19: {  // where(a < b, b, a): a max written with a comparison
        push(graph.select(graph.less(a.value, b.value), b.value, a.value), std::max(ma, mb));
        break;
      }
      case 20:  // GELU, the erf form: x/2 (1 + erf(x / sqrt(2)))
        push(graph.mul(graph.mul(a.value, graph.constant(0.5)),
                       graph.add(graph.constant(1.0),
                                 graph.erf(graph.mul(a.value, graph.constant(M_SQRT1_2))))),
             ma);
        break;
    }
  }

  std::vector<Candidate> pool_;
};

RC_GTEST_PROP(CompiledKernel, EqualsFloat64InterpreterOnRandomChains, ()) {
  if (!compiler_info().built_in) return;  // covered by CompiledKernel.BuiltIn
  RandomChain chain;
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
