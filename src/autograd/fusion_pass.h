#pragma once
// The fusion pass (issue 24): over the graph of a stage's differentiable
// calls, find the maximal chains of elementwise and row-reduction calls
// that one compiled kernel can run (autograd/fused_program.h compiles and
// runs them, forward and backward), and the order to run chains and the
// remaining calls in.
//
// A call is fusable when it is one of kFusableCalls, its dtype is f32 or
// bf16, and every tensor it reads is either of its output's shape (a full
// value of the chain's [rows, cols] space) or a vector of cols elements (a
// norm's weight, a bias). A fusable call joins the chain of a fusable
// producer of one of its inputs when the two have the same shape and
// dtype, and joining makes no cycle: none of its other inputs may depend
// on that chain through a call outside it (x -> add -> matmul -> add
// stays two chains). Chains never cross a call that is not fusable.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace lt::autograd {

// "add", "sub", "mul", "div", "scale", "silu", "gelu_tanh", "swiglu",
// "rms_norm", "layer_norm", "bias_add" (the bias of a linear call, split
// off so that bias + activation fuse), and "rotary_embedding" (positions
// 0..T-1; always a chain of its own, autograd/fused_rope.h).
bool is_fusable_call(const std::string& fn);

struct CallNode {
  std::string fn;
  std::vector<int32_t> inputs;  // value ids; -1: an optional input left out
  int32_t output = -1;          // value id
  std::vector<double> numbers;  // eps, a scale factor (TracedCall::numbers)
};

struct CallGraph {
  std::vector<CallNode> nodes;   // in call order, a topological order
  std::vector<Shape> shapes;     // per value
  std::vector<DType> dtypes;     // per value
  std::vector<bool> used_after;  // per value: read after the graph (a stage's output)
};

struct FusedChain {
  std::vector<int32_t> nodes;  // in call order
};

struct FusionPlan {
  std::vector<FusedChain> chains;
  std::vector<int32_t> chain_of;  // per node: its chain, or -1
  // What to run, in order: a node outside every chain (>= 0) or a chain c
  // (as -1 - c). Every node appears once, alone or in its chain.
  std::vector<int32_t> schedule;
};

// `held_out`: per node, true to leave it out of every chain (its call runs
// as traced); empty: none.
FusionPlan plan_fusion(const CallGraph& graph, const std::vector<bool>& held_out = {});

// The values a chain reads from outside it (in order of first use) and
// those it produces that are read outside it or after the graph.
std::vector<int32_t> chain_inputs(const CallGraph& graph, const FusedChain& chain);
std::vector<int32_t> chain_outputs(const CallGraph& graph, const FusionPlan& plan, int32_t chain);

}  // namespace lt::autograd
