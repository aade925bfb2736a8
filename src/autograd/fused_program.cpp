#include "autograd/fused_program.h"

#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "autograd/functions.h"
#include "compile/gradient.h"
#include "core/error.h"
#include "ops/op_profile.h"

namespace lt::autograd {

CallGraph call_graph(const CallTrace& trace, const std::vector<Tensor>& external,
                     const Tensor& output, std::vector<CallAgain>* again, int32_t* output_value,
                     const std::set<size_t>& biased) {
  CallGraph g;
  std::unordered_map<const TensorImpl*, int32_t> value_of;
  auto add_value = [&](const Tensor& t) {
    const int32_t id = static_cast<int32_t>(g.shapes.size());
    g.shapes.push_back(t.shape());
    g.dtypes.push_back(t.dtype());
    g.used_after.push_back(false);
    return id;
  };
  for (const Tensor& t : external) {
    LT_CHECK(t.defined(), "fusion: an external tensor is undefined");
    value_of[t.impl_ptr().get()] = add_value(t);
  }
  for (size_t i = 0; i < trace.calls.size(); ++i) {
    const TracedCall& call = trace.calls[i];
    CallNode node;
    node.fn = call.fn;
    node.numbers = call.numbers;
    for (size_t k = 0; k < call.inputs.size(); ++k) {
      const Tensor& t = call.inputs[k];
      if (!t.defined()) {
        node.inputs.push_back(-1);
        continue;
      }
      auto it = value_of.find(t.impl_ptr().get());
      LT_CHECK(it != value_of.end(), "fusion: call ", i, " (", call.fn, ") reads input ", k, " (",
               t.str(), "), made outside the traced calls: the stage cannot be replayed");
      node.inputs.push_back(it->second);
    }
    const bool with_bias = call.fn == "linear" && node.inputs.size() == 3 && node.inputs[2] >= 0 &&
                           biased.count(i) == 0;
    if (with_bias) {
      // linear(x, w, b) = bias_add(linear(x, w), b): the bias may then fuse.
      CallNode product{"linear", {node.inputs[0], node.inputs[1], -1}, -1, {}};
      Shape shape = call.output.shape();
      product.output = static_cast<int32_t>(g.shapes.size());
      g.shapes.push_back(shape);
      g.dtypes.push_back(call.output.dtype());
      g.used_after.push_back(false);
      g.nodes.push_back(product);
      if (again)
        again->push_back(
            [](const std::vector<Tensor>& in) { return linear(in[0], in[1], Tensor()); });
      node = CallNode{"bias_add", {product.output, node.inputs[2]}, -1, {}};
    }
    node.output = add_value(call.output);
    value_of[call.output.impl_ptr().get()] = node.output;
    g.nodes.push_back(std::move(node));
    if (again) again->push_back(with_bias ? CallAgain() : call.again);
  }
  auto it = value_of.find(output.impl_ptr().get());
  LT_CHECK(output.defined() && it != value_of.end() &&
               it->second >= static_cast<int32_t>(external.size()),
           "fusion: the stage's result is not the result of a traced call");
  g.used_after[static_cast<size_t>(it->second)] = true;
  if (output_value) *output_value = it->second;
  return g;
}

namespace {

// The trace calls whose linear keeps its bias: those whose bias_add would be
// a chain by itself (GPT-2's qkv projection). cuBLASLt's epilogue adds such
// a bias and sums its gradient inside the GEMMs, where a kernel of its own
// reads and writes the product once more each way (0.095 GPU-ms per 1k
// tokens on GPT-2 124M, H200).
std::set<size_t> lone_biases(const CallTrace& trace, const CallGraph& g, const FusionPlan& plan) {
  std::set<size_t> lone;
  size_t node = 0;  // call_graph's first node of call i
  for (size_t i = 0; i < trace.calls.size(); ++i) {
    const TracedCall& call = trace.calls[i];
    const bool split = call.fn == "linear" && call.inputs.size() == 3 && call.inputs[2].defined();
    if (split) {
      const int32_t chain = plan.chain_of.at(node + 1);
      if (chain >= 0 && plan.chains[static_cast<size_t>(chain)].nodes.size() == 1) lone.insert(i);
    }
    node += split ? 2 : 1;
  }
  LT_CHECK(node == g.nodes.size(), "fusion: the call graph has ", g.nodes.size(),
           " nodes where the trace makes ", node);
  return lone;
}

}  // namespace

namespace {

// Per node of call_graph(trace, ..., biased): the trace call it comes from
// (a split linear makes two nodes).
std::vector<size_t> node_calls(const CallTrace& trace, const std::set<size_t>& biased) {
  std::vector<size_t> calls;
  for (size_t i = 0; i < trace.calls.size(); ++i) {
    const TracedCall& call = trace.calls[i];
    const bool split = call.fn == "linear" && call.inputs.size() == 3 && call.inputs[2].defined() &&
                       biased.count(i) == 0;
    calls.push_back(i);
    if (split) calls.push_back(i);
  }
  return calls;
}

std::vector<bool> held_out_nodes(const std::vector<size_t>& node_call,
                                 const std::set<size_t>& as_traced) {
  std::vector<bool> held(node_call.size());
  for (size_t k = 0; k < node_call.size(); ++k) held[k] = as_traced.count(node_call[k]) != 0;
  return held;
}

struct PlannedGraph {
  CallGraph graph;
  FusionPlan plan;
  std::vector<size_t> node_call;  // per node: its trace call
};

// planned_call_graph, with the trace calls `as_traced` left out of every
// chain; a linear among them keeps its bias (its GEMM adds it).
PlannedGraph plan_graph(const CallTrace& trace, const std::vector<Tensor>& external,
                        const Tensor& output, std::vector<CallAgain>* again, int32_t* output_value,
                        const std::set<size_t>& as_traced) {
  const CallGraph split = call_graph(trace, external, output);
  std::set<size_t> biased = lone_biases(
      trace, split, plan_fusion(split, held_out_nodes(node_calls(trace, {}), as_traced)));
  for (size_t i : as_traced) {
    if (trace.calls[i].fn == "linear") biased.insert(i);
  }
  PlannedGraph p;
  p.graph = call_graph(trace, external, output, again, output_value, biased);
  p.node_call = node_calls(trace, biased);
  LT_CHECK(p.node_call.size() == p.graph.nodes.size(), "fusion: the call graph has ",
           p.graph.nodes.size(), " nodes where the trace makes ", p.node_call.size());
  p.plan = plan_fusion(p.graph, held_out_nodes(p.node_call, as_traced));
  return p;
}

}  // namespace

std::pair<CallGraph, FusionPlan> planned_call_graph(const CallTrace& trace,
                                                    const std::vector<Tensor>& external,
                                                    const Tensor& output,
                                                    std::vector<CallAgain>* again,
                                                    int32_t* output_value) {
  PlannedGraph p = plan_graph(trace, external, output, again, output_value, {});
  return {std::move(p.graph), std::move(p.plan)};
}

FusedProgram::FusedProgram(const CallTrace& trace, const std::vector<Tensor>& external,
                           const Tensor& output, compile::KernelCache& cache, ChainChooser* chooser)
    : external_count_(static_cast<int32_t>(external.size())) {
  // The chains' kernels are for the device of the traced tensors.
  const Device device = external.empty() ? Device::cpu() : external.front().device();
  PlannedGraph planned = plan_graph(trace, external, output, &again_, &output_value_, {});
  if (chooser != nullptr) {
    std::set<size_t> as_traced;  // the calls of chains that run faster as calls
    int64_t slower = 0;
    for (size_t c = 0; c < planned.plan.chains.size(); ++c) {
      if (chooser->runs_compiled(planned.graph, planned.plan, static_cast<int32_t>(c), again_,
                                 device)) {
        continue;
      }
      ++slower;
      for (int32_t m : planned.plan.chains[c].nodes) {
        as_traced.insert(planned.node_call[static_cast<size_t>(m)]);
      }
    }
    if (!as_traced.empty()) {
      again_.clear();
      planned = plan_graph(trace, external, output, &again_, &output_value_, as_traced);
      chains_run_as_calls_ = slower;
    }
  }
  graph_ = std::move(planned.graph);
  plan_ = std::move(planned.plan);
  for (size_t c = 0; c < plan_.chains.size(); ++c) {
    const auto chain = static_cast<int32_t>(c);
    const bool rope =
        graph_.nodes[static_cast<size_t>(plan_.chains[c].nodes.front())].fn == "rotary_embedding";
    if (rope) {
      chains_.push_back(std::make_shared<FusedRopeKernel>(graph_, plan_, chain, cache, device));
    } else {
      chains_.push_back(std::make_shared<FusedChainKernel>(graph_, plan_, chain, cache, device));
    }
  }
  // Each value is dropped after the step that reads it last (not the result).
  std::vector<int32_t> last_read(graph_.shapes.size(), -1);
  for (size_t step = 0; step < plan_.schedule.size(); ++step) {
    const int32_t unit = plan_.schedule[step];
    const std::vector<int32_t> reads =
        unit >= 0 ? graph_.nodes[static_cast<size_t>(unit)].inputs
                  : chains_[static_cast<size_t>(-1 - unit)]->input_values();
    for (int32_t v : reads) {
      if (v >= 0) last_read[static_cast<size_t>(v)] = static_cast<int32_t>(step);
    }
  }
  release_after_.resize(plan_.schedule.size());
  for (size_t v = 0; v < last_read.size(); ++v) {
    if (last_read[v] >= 0 && static_cast<int32_t>(v) != output_value_) {
      release_after_[static_cast<size_t>(last_read[v])].push_back(static_cast<int32_t>(v));
    }
  }
}

int64_t FusedProgram::fused_calls() const {
  int64_t n = 0;
  for (const FusedChain& c : plan_.chains) n += static_cast<int64_t>(c.nodes.size());
  return n;
}

Tensor FusedProgram::run(const std::vector<Tensor>& external) const {
  LT_CHECK(static_cast<int32_t>(external.size()) == external_count_, "fusion: the program takes ",
           external_count_, " external tensors, got ", external.size());
  std::vector<Tensor> slot(graph_.shapes.size());
  for (size_t i = 0; i < external.size(); ++i) {
    LT_CHECK(external[i].shape() == graph_.shapes[i] && external[i].dtype() == graph_.dtypes[i],
             "fusion: external tensor ", i, " is ", external[i].str(),
             ", not the shape and dtype it was traced with");
    slot[i] = external[i];
  }
  auto gather = [&](const std::vector<int32_t>& values) {
    std::vector<Tensor> in;
    for (int32_t v : values) in.push_back(v < 0 ? Tensor() : slot[static_cast<size_t>(v)]);
    return in;
  };
  for (size_t step = 0; step < plan_.schedule.size(); ++step) {
    const int32_t unit = plan_.schedule[step];
    if (unit >= 0) {
      const CallNode& n = graph_.nodes[static_cast<size_t>(unit)];
      std::vector<Tensor> in = gather(n.inputs);
      // LT_OP_PROFILE's class: "forward <call>" ("forward linear"; eager
      // runs name theirs by layer: "forward gemm").
      std::optional<ops::OpProfileScope> profile;
      if (ops::op_profile_enabled() && !in.empty() && in.front().defined()) {
        profile.emplace(("forward " + n.fn).c_str(), in.front().device());
      }
      slot[static_cast<size_t>(n.output)] = again_[static_cast<size_t>(unit)](in);
    } else {
      const ChainKernel& chain = *chains_[static_cast<size_t>(-1 - unit)];
      std::vector<Tensor> out = chain.run(gather(chain.input_values()));
      for (size_t k = 0; k < out.size(); ++k) {
        slot[static_cast<size_t>(chain.output_values()[k])] = std::move(out[k]);
      }
    }
    for (int32_t v : release_after_[step]) slot[static_cast<size_t>(v)] = Tensor();
  }
  return slot[static_cast<size_t>(output_value_)];
}

std::vector<compile::KernelGraph> program_kernel_graphs(const CallTrace& trace,
                                                        const std::vector<Tensor>& external,
                                                        const Tensor& output) {
  const auto [graph, plan] = planned_call_graph(trace, external, output);
  std::vector<compile::KernelGraph> graphs;
  for (size_t chain = 0; chain < plan.chains.size(); ++chain) {
    const CallNode& first = graph.nodes[static_cast<size_t>(plan.chains[chain].nodes.front())];
    if (first.fn == "rotary_embedding") {  // autograd/fused_rope.cpp's two graphs
      const int64_t heads = graph.shapes[static_cast<size_t>(first.inputs[0])].at(2);
      graphs.push_back(rope_kernel_graph(graph.dtypes[static_cast<size_t>(first.output)], heads));
      graphs.push_back(rope_gradient_graph(graphs.back()));
      continue;
    }
    graphs.push_back(chain_kernel_graph(graph, plan, static_cast<int32_t>(chain)));
    const std::vector<bool> all(graphs.back().inputs().size(), true);
    graphs.push_back(
        compile::gradient_graph(graphs.back(), all, compile::GradientStorage::AsTheForward));
  }
  return graphs;
}

}  // namespace lt::autograd
