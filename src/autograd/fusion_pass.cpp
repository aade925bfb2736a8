#include "autograd/fusion_pass.h"

#include <algorithm>
#include <array>
#include <set>

#include "core/error.h"

namespace lt::autograd {
namespace {

constexpr std::array<const char*, 12> kFusableCalls = {
    "add",       "sub",    "mul",      "div",        "scale",    "silu",
    "gelu_tanh", "swiglu", "rms_norm", "layer_norm", "bias_add", "rotary_embedding"};

// RoPE runs in a space of its own (autograd/fused_rope.h): a chain alone.
bool is_rope(const std::string& fn) {
  return fn == "rotary_embedding";
}

// Calls whose every input must be a full value (no vector operand).
bool needs_full_inputs(const std::string& fn) {
  return fn == "scale" || fn == "silu" || fn == "gelu_tanh" || fn == "swiglu";
}

bool is_col_of(const Shape& vector, const Shape& full) {
  return vector.size() == 1 && !full.empty() && vector[0] == full.back();
}

// The call's own conditions, before any chain: see the header.
bool fusable_here(const CallGraph& g, const CallNode& n) {
  if (!is_fusable_call(n.fn) || n.output < 0) return false;
  const Shape& space = g.shapes[static_cast<size_t>(n.output)];
  const DType dtype = g.dtypes[static_cast<size_t>(n.output)];
  if (space.empty() || (dtype != DType::F32 && dtype != DType::BF16)) return false;
  if (is_rope(n.fn)) {
    // x [B, T, H, D], positions 0..T-1 (none given), the cos and sin tables.
    return space.size() == 4 && space[3] % 2 == 0 && n.inputs.size() == 4 && n.inputs[0] >= 0 &&
           g.shapes[static_cast<size_t>(n.inputs[0])] == space &&
           g.dtypes[static_cast<size_t>(n.inputs[0])] == dtype && n.inputs[1] < 0 &&
           n.inputs[2] >= 0 && n.inputs[3] >= 0;
  }
  bool first_full = false;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const int32_t v = n.inputs[i];
    if (v < 0) continue;
    if (g.dtypes[static_cast<size_t>(v)] != dtype) return false;
    const Shape& shape = g.shapes[static_cast<size_t>(v)];
    const bool full = shape == space;
    if (i == 0) first_full = full;
    if (!full && (needs_full_inputs(n.fn) || !is_col_of(shape, space))) return false;
  }
  // Norms, bias_add: the first input is the full one. add/sub/mul/div: either.
  const bool binary = n.fn == "add" || n.fn == "sub" || n.fn == "mul" || n.fn == "div";
  if (!binary && !first_full) return false;
  if (binary) {
    const bool any_full = std::any_of(n.inputs.begin(), n.inputs.end(), [&](int32_t v) {
      return v >= 0 && g.shapes[static_cast<size_t>(v)] == space;
    });
    if (!any_full) return false;
  }
  return true;
}

}  // namespace

bool is_fusable_call(const std::string& fn) {
  return std::find(kFusableCalls.begin(), kFusableCalls.end(), fn) != kFusableCalls.end();
}

FusionPlan plan_fusion(const CallGraph& g, const std::vector<bool>& held_out) {
  const size_t values = g.shapes.size();
  LT_CHECK(g.dtypes.size() == values && g.used_after.size() == values,
           "fusion: the graph's value tables differ in length");
  LT_CHECK(held_out.empty() || held_out.size() == g.nodes.size(), "fusion: ", held_out.size(),
           " held-out flags for ", g.nodes.size(), " nodes");
  std::vector<int32_t> producer(values, -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const CallNode& n = g.nodes[i];
    LT_CHECK(n.output >= 0 && static_cast<size_t>(n.output) < values &&
                 producer[static_cast<size_t>(n.output)] < 0,
             "fusion: node ", i, " (", n.fn, ") writes value ", n.output, " that is not new");
    producer[static_cast<size_t>(n.output)] = static_cast<int32_t>(i);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int32_t v : g.nodes[i].inputs) {
      LT_CHECK(v < 0 || (static_cast<size_t>(v) < values &&
                         producer[static_cast<size_t>(v)] < static_cast<int32_t>(i)),
               "fusion: node ", i, " (", g.nodes[i].fn, ") reads value ", v, " before it is made");
    }
  }

  FusionPlan plan;
  plan.chain_of.assign(g.nodes.size(), -1);
  // Per value: the chains it depends on, through any calls (itself included).
  std::vector<std::set<int32_t>> depends(values);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const CallNode& n = g.nodes[i];
    std::set<int32_t> deps;
    for (int32_t v : n.inputs) {
      if (v >= 0)
        deps.insert(depends[static_cast<size_t>(v)].begin(), depends[static_cast<size_t>(v)].end());
    }
    if (fusable_here(g, n) && (held_out.empty() || !held_out[i])) {
      auto joinable = [&](int32_t chain) {
        for (int32_t v : n.inputs) {
          if (v < 0) continue;
          const int32_t p = producer[static_cast<size_t>(v)];
          const bool inside = p >= 0 && plan.chain_of[static_cast<size_t>(p)] == chain;
          if (!inside && depends[static_cast<size_t>(v)].count(chain) != 0) return false;
        }
        return true;
      };
      int32_t chain = -1;
      for (int32_t v : n.inputs) {
        if (v < 0 || is_rope(n.fn)) continue;
        const int32_t p = producer[static_cast<size_t>(v)];
        if (p < 0) continue;
        const int32_t c = plan.chain_of[static_cast<size_t>(p)];
        if (c < 0 || g.shapes[static_cast<size_t>(v)] != g.shapes[static_cast<size_t>(n.output)] ||
            is_rope(g.nodes[static_cast<size_t>(plan.chains[static_cast<size_t>(c)].nodes[0])].fn))
          continue;
        if (joinable(c)) {
          chain = c;
          break;
        }
      }
      if (chain < 0) {
        chain = static_cast<int32_t>(plan.chains.size());
        plan.chains.emplace_back();
      }
      plan.chains[static_cast<size_t>(chain)].nodes.push_back(static_cast<int32_t>(i));
      plan.chain_of[i] = chain;
      deps.insert(chain);
    }
    depends[static_cast<size_t>(n.output)] = std::move(deps);
  }

  // The schedule: units (chains, lone calls) in dependency order, the one
  // whose first call came first when several are ready.
  const auto unit_of = [&](int32_t node) {
    const int32_t c = plan.chain_of[static_cast<size_t>(node)];
    return c >= 0 ? -1 - c : node;
  };
  std::vector<int32_t> units;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const int32_t u = unit_of(static_cast<int32_t>(i));
    if (std::find(units.begin(), units.end(), u) == units.end()) units.push_back(u);
  }
  std::vector<bool> done(g.nodes.size(), false);
  std::vector<bool> scheduled(units.size(), false);
  while (plan.schedule.size() < units.size()) {
    bool progressed = false;
    for (size_t k = 0; k < units.size() && !progressed; ++k) {
      if (scheduled[k]) continue;
      const int32_t u = units[k];
      std::vector<int32_t> members =
          u >= 0 ? std::vector<int32_t>{u} : plan.chains[static_cast<size_t>(-1 - u)].nodes;
      bool ready = true;
      for (int32_t m : members) {
        for (int32_t v : g.nodes[static_cast<size_t>(m)].inputs) {
          if (v < 0) continue;
          const int32_t p = producer[static_cast<size_t>(v)];
          if (p >= 0 && !done[static_cast<size_t>(p)] && unit_of(p) != u) ready = false;
        }
      }
      if (!ready) continue;
      for (int32_t m : members) done[static_cast<size_t>(m)] = true;
      scheduled[k] = true;
      plan.schedule.push_back(u);
      progressed = true;
    }
    LT_CHECK(progressed, "fusion: the chains depend on each other in a cycle");
  }
  return plan;
}

std::vector<int32_t> chain_inputs(const CallGraph& g, const FusedChain& chain) {
  std::vector<int32_t> made, in;
  for (int32_t m : chain.nodes) {
    for (int32_t v : g.nodes[static_cast<size_t>(m)].inputs) {
      if (v < 0 || std::find(made.begin(), made.end(), v) != made.end()) continue;
      if (std::find(in.begin(), in.end(), v) == in.end()) in.push_back(v);
    }
    made.push_back(g.nodes[static_cast<size_t>(m)].output);
  }
  return in;
}

std::vector<int32_t> chain_outputs(const CallGraph& g, const FusionPlan& plan, int32_t chain) {
  std::vector<int32_t> out;
  for (int32_t m : plan.chains[static_cast<size_t>(chain)].nodes) {
    const int32_t v = g.nodes[static_cast<size_t>(m)].output;
    bool read_outside = g.used_after[static_cast<size_t>(v)];
    for (size_t j = 0; j < g.nodes.size() && !read_outside; ++j) {
      if (plan.chain_of[j] == chain) continue;
      const auto& ins = g.nodes[j].inputs;
      read_outside = std::find(ins.begin(), ins.end(), v) != ins.end();
    }
    if (read_outside) out.push_back(v);
  }
  return out;
}

}  // namespace lt::autograd
