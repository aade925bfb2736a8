// The fusion pass on hand-built call graphs: which chains it finds (count,
// members, their order), that it never fuses across a call it cannot fuse
// (a matmul, a linear) nor into a cycle, and the schedule it gives.
#include <gtest/gtest.h>

#include "autograd/fusion_pass.h"
#include "core/error.h"

namespace lt::autograd {
namespace {

// A call graph written by hand: values are added with their shapes, calls
// in order.
class GraphBuilder {
 public:
  int32_t value(const Shape& shape, DType dtype = DType::F32) {
    g.shapes.push_back(shape);
    g.dtypes.push_back(dtype);
    g.used_after.push_back(false);
    return static_cast<int32_t>(g.shapes.size() - 1);
  }
  int32_t call(const std::string& fn, std::vector<int32_t> inputs, const Shape& out_shape,
               std::vector<double> numbers = {}) {
    const int32_t out = value(out_shape);
    g.nodes.push_back({fn, std::move(inputs), out, std::move(numbers)});
    return out;
  }
  int32_t last_node() const { return static_cast<int32_t>(g.nodes.size() - 1); }
  CallGraph g;
};

const Shape kFull{2, 3, 8};
const Shape kWide{2, 3, 16};
const Shape kCol{8};

int32_t chain_unit(int32_t c) {
  return -1 - c;
}

// One pre-norm block's calls, as DecoderBlock::forward makes them:
//   n1 = rms_norm(x)                      node 0  chain 0
//   a  = linear(n1, wq)                   node 1
//   h  = add(x, a)                        node 2  chain 1 (chain 0 would be a cycle)
//   n2 = rms_norm(h)                      node 3  chain 1
//   g  = linear(n2, wg), u = linear(n2, wu)  nodes 4, 5
//   s  = swiglu(g, u)                     node 6  chain 2 (another shape)
//   d  = linear(s, wd)                    node 7
//   y  = add(h, d)                        node 8  chain 3 (chain 1 would be a cycle)
TEST(FusionPass, FindsTheChainsOfAPreNormBlock) {
  GraphBuilder b;
  const int32_t x = b.value(kFull), w1 = b.value(kCol), wq = b.value({8, 8}), w2 = b.value(kCol),
                wg = b.value({16, 8}), wu = b.value({16, 8}), wd = b.value({8, 16});
  const int32_t n1 = b.call("rms_norm", {x, w1}, kFull, {1e-6});
  const int32_t a = b.call("linear", {n1, wq, -1}, kFull);
  const int32_t h = b.call("add", {x, a}, kFull);
  const int32_t n2 = b.call("rms_norm", {h, w2}, kFull, {1e-6});
  const int32_t gate = b.call("linear", {n2, wg, -1}, kWide);
  const int32_t up = b.call("linear", {n2, wu, -1}, kWide);
  const int32_t s = b.call("swiglu", {gate, up}, kWide);
  const int32_t d = b.call("linear", {s, wd, -1}, kFull);
  const int32_t y = b.call("add", {h, d}, kFull);
  b.g.used_after[static_cast<size_t>(y)] = true;

  const FusionPlan plan = plan_fusion(b.g);
  ASSERT_EQ(plan.chains.size(), 4u);
  EXPECT_EQ(plan.chains[0].nodes, (std::vector<int32_t>{0}));
  EXPECT_EQ(plan.chains[1].nodes, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(plan.chains[2].nodes, (std::vector<int32_t>{6}));
  EXPECT_EQ(plan.chains[3].nodes, (std::vector<int32_t>{8}));
  EXPECT_EQ(plan.chain_of, (std::vector<int32_t>{0, -1, 1, 1, -1, -1, 2, -1, 3}));
  EXPECT_EQ(plan.schedule, (std::vector<int32_t>{chain_unit(0), 1, chain_unit(1), 4, 5,
                                                 chain_unit(2), 7, chain_unit(3)}));
  // The residual stream h leaves chain 1 (read by chain 3), n2 too (read by
  // the linears); the sum x + a is read inside only as far as rms_norm goes.
  EXPECT_EQ(chain_inputs(b.g, plan.chains[1]), (std::vector<int32_t>{x, a, w2}));
  EXPECT_EQ(chain_outputs(b.g, plan, 1), (std::vector<int32_t>{h, n2}));
  EXPECT_EQ(chain_outputs(b.g, plan, 3), (std::vector<int32_t>{y}));
}

// bias + activation: linear's bias (split off as bias_add) joins the GELU,
// but the chain stops at the matmul on both sides.
TEST(FusionPass, FusesBiasAndActivationButNotAcrossAMatmul) {
  GraphBuilder b;
  const int32_t x = b.value(kFull), w = b.value({8, 8}), bias = b.value(kCol);
  const int32_t t = b.call("scale", {x}, kFull, {0.5});
  const int32_t m = b.call("matmul", {t, w}, kFull);
  const int32_t biased = b.call("bias_add", {m, bias}, kFull);
  const int32_t act = b.call("gelu_tanh", {biased}, kFull);
  const int32_t m2 = b.call("matmul", {act, w}, kFull);
  const int32_t out = b.call("silu", {m2}, kFull);
  b.g.used_after[static_cast<size_t>(out)] = true;
  const FusionPlan plan = plan_fusion(b.g);
  ASSERT_EQ(plan.chains.size(), 3u);
  EXPECT_EQ(plan.chains[0].nodes, (std::vector<int32_t>{0}));
  EXPECT_EQ(plan.chains[1].nodes, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(plan.chains[2].nodes, (std::vector<int32_t>{5}));
  EXPECT_EQ(plan.schedule,
            (std::vector<int32_t>{chain_unit(0), 1, chain_unit(1), 4, chain_unit(2)}));
  EXPECT_EQ(chain_inputs(b.g, plan.chains[1]), (std::vector<int32_t>{m, bias}));
  EXPECT_EQ(chain_outputs(b.g, plan, 1), (std::vector<int32_t>{act}));
}

// A chain's value read by a call outside it, while a later call of the
// chain does not depend on that one: the chain runs before the outside call
// even though its last member comes after it in call order.
TEST(FusionPass, SchedulesAChainBeforeAnIndependentReaderOfItsValues) {
  GraphBuilder b;
  const int32_t x = b.value(kFull), y = b.value(kFull), w = b.value({8, 8});
  const int32_t s = b.call("add", {x, y}, kFull);
  const int32_t side = b.call("matmul", {s, w}, kFull);  // reads s, not on the chain's path
  const int32_t t = b.call("mul", {s, x}, kFull);        // joins add's chain
  const int32_t out = b.call("add", {side, t}, kFull);   // would close a cycle: its own chain
  b.g.used_after[static_cast<size_t>(out)] = true;
  const FusionPlan plan = plan_fusion(b.g);
  ASSERT_EQ(plan.chains.size(), 2u);
  EXPECT_EQ(plan.chains[0].nodes, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(plan.chains[1].nodes, (std::vector<int32_t>{3}));
  EXPECT_EQ(plan.schedule, (std::vector<int32_t>{chain_unit(0), 1, chain_unit(1)}));
  EXPECT_EQ(chain_outputs(b.g, plan, 0), (std::vector<int32_t>{s, t}));
}

// Shapes and dtypes: a call over another shape (a reshape in between), a
// non-vector broadcast, or an f64 value start or stop chains.
TEST(FusionPass, KeepsChainsToOneShapeAndDtype) {
  GraphBuilder b;
  const int32_t x = b.value(kFull), r = b.value({2, 1, 8}), d = b.value(kFull, DType::F64);
  const int32_t s = b.call("silu", {x}, kFull);
  const int32_t v = b.call("reshape", {s}, {6, 8});
  const int32_t s2 = b.call("silu", {v}, {6, 8});          // another shape: a new chain
  const int32_t broadcast = b.call("add", {x, r}, kFull);  // [2, 1, 8] is not a [cols] vector
  const int32_t f64 = b.call("scale", {d}, kFull, {2.0});
  (void)s2;
  (void)broadcast;
  (void)f64;
  const FusionPlan plan = plan_fusion(b.g);
  ASSERT_EQ(plan.chains.size(), 2u);
  EXPECT_EQ(plan.chains[0].nodes, (std::vector<int32_t>{0}));
  EXPECT_EQ(plan.chains[1].nodes, (std::vector<int32_t>{2}));
  EXPECT_EQ(plan.chain_of, (std::vector<int32_t>{0, -1, 1, -1, -1}));
}

// RoPE is a chain alone: the scale before it and the add after it (same
// shape) do not join it, and a call with positions given is not fused.
TEST(FusionPass, KeepsRopeInAChainOfItsOwn) {
  GraphBuilder b;
  const Shape heads{2, 3, 4, 8};
  const int32_t x = b.value(heads), cos = b.value({16, 4}, DType::F64),
                sin = b.value({16, 4}, DType::F64), positions = b.value({3}, DType::I64);
  const int32_t s = b.call("scale", {x}, heads, {2.0});
  const int32_t r = b.call("rotary_embedding", {s, -1, cos, sin}, heads);
  const int32_t y = b.call("add", {r, x}, heads);
  b.call("rotary_embedding", {y, positions, cos, sin}, heads);
  const FusionPlan plan = plan_fusion(b.g);
  ASSERT_EQ(plan.chains.size(), 3u);
  EXPECT_EQ(plan.chain_of, (std::vector<int32_t>{0, 1, 2, -1}));
}

TEST(FusionPass, RefusesAGraphThatReadsAValueBeforeItIsMade) {
  GraphBuilder b;
  const int32_t x = b.value(kFull);              // value 0
  b.call("silu", {x + 2}, kFull);                // value 1, reads value 2
  EXPECT_EQ(b.call("silu", {x}, kFull), x + 2);  // made here, after
  EXPECT_THROW(plan_fusion(b.g), Error);
}

}  // namespace
}  // namespace lt::autograd
