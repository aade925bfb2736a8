#include "autograd/engine.h"

#include <atomic>
#include <cstdlib>
#include <optional>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "ops/elementwise.h"
#include "ops/op_profile.h"

namespace lt::autograd {
namespace {
std::atomic<uint64_t> next_sequence{0};
}
Node::Node() : sequence(next_sequence.fetch_add(1)) {}

Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending;
  for (auto& e : next) pending.push_back(std::move(e.node));
  next.clear();
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    // Only a node we hold the last reference to dies here; take its edges
    // first so its own destructor has nothing left to recurse into.
    if (n && n.use_count() == 1) {
      for (auto& e : n->next) pending.push_back(std::move(e.node));
      n->next.clear();
    }
  }
}
}  // namespace lt::autograd

namespace lt {

namespace autograd {
namespace {
// The seed of ones made by the backward() running on this thread, if any.
thread_local const TensorImpl* unit_seed = nullptr;
// The running node's grad_sum_target()s, one per input (Note [Weight
// gradients summed by the GEMM]); null outside a node's backward.
thread_local const std::vector<Tensor>* sum_targets = nullptr;
thread_local uint64_t sums_in_place = 0;

bool weight_grad_sum_in_gemm() {
  const char* v = std::getenv("LT_WEIGHT_GRAD_SUM");
  return v == nullptr || std::string_view(v) != "add";
}
}  // namespace

bool is_unit_seed(const Tensor& grad) {
  return grad.defined() && unit_seed != nullptr && grad.impl() == unit_seed;
}

uint64_t grad_sums_in_place() {
  return sums_in_place;
}

Tensor grad_sum_target(size_t input) {
  if (sum_targets == nullptr || input >= sum_targets->size()) return Tensor();
  return (*sum_targets)[input];
}

}  // namespace autograd

namespace {

using autograd::Node;

// Marks the seed of ones for autograd::is_unit_seed for one backward()
// (restoring the outer one's, for a backward run inside a node).
class UnitSeedScope {
 public:
  explicit UnitSeedScope(const TensorImpl* seed) : previous_(autograd::unit_seed) {
    autograd::unit_seed = seed;
  }
  ~UnitSeedScope() { autograd::unit_seed = previous_; }
  UnitSeedScope(const UnitSeedScope&) = delete;
  UnitSeedScope& operator=(const UnitSeedScope&) = delete;

 private:
  const TensorImpl* previous_;
};

// Offers a node's in-place sums for the length of its backward.
class SumTargetsScope {
 public:
  explicit SumTargetsScope(const std::vector<Tensor>* targets) : previous_(autograd::sum_targets) {
    autograd::sum_targets = targets;
  }
  ~SumTargetsScope() { autograd::sum_targets = previous_; }
  SumTargetsScope(const SumTargetsScope&) = delete;
  SumTargetsScope& operator=(const SumTargetsScope&) = delete;

 private:
  const std::vector<Tensor>* previous_;
};

// Whether a leaf's .grad may be written in place: nothing else holds it,
// nor a view of its memory (an executor's copy in flight or a hook holding
// it counts), and it is contiguous.
bool grad_held_alone(const Tensor& current) {
  return current.defined() && current.impl_ptr().use_count() == 1 &&
         current.impl()->storage.use_count() == 1 && current.is_contiguous();
}

// The leaf's .grad, when a node whose only path to the leaf is `edge` may
// add its gradient into it in place (Note [Weight gradients summed by the
// GEMM]): the same conditions as accumulate_grad's in-place sum, and no
// other gradient of the leaf in this graph.
Tensor in_place_sum_target(const autograd::Edge& edge,
                           const std::unordered_set<const Node*>& sole_paths) {
  if (!edge.node || sole_paths.count(edge.node.get()) == 0) return Tensor();
  const TensorImpl& leaf = *edge.node->leaf;
  if (!leaf.autograd) return Tensor();
  const Tensor& current = leaf.autograd->grad;
  return grad_held_alone(current) && current.shape() == leaf.shape ? current : Tensor();
}

Tensor sum_gradients(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  // A tensor read by several ops (a norm's input and a residual, q/k/v's
  // input) gets their gradients added here: its own class in the profile.
  ops::OpProfileScope profile("backward gradient sum", a.device());
  return ops::add(a, b);
}

// The device of a node's first defined output gradient (for profiling).
Device device_of(const std::vector<Tensor>& grads) {
  for (const Tensor& g : grads) {
    if (g.defined()) return g.device();
  }
  return Device::cpu();
}

void check_gradient_matches(const Tensor& grad, const TensorImpl& leaf, const char* where) {
  LT_CHECK(grad.shape() == leaf.shape, where, ": gradient of shape ", shape_str(grad.shape()),
           " for a tensor of shape ", shape_str(leaf.shape));
}

// .grad += g. In place when nothing else can see .grad's data
// (grad_held_alone), so a later chunk's gradient needs no third tensor for
// the sum; otherwise a new sum, as before.
void accumulate_grad(const Tensor& param, const Tensor& g) {
  const Tensor& current = param.grad();
  if (!current.defined()) {
    param.set_grad(g);
  } else if (grad_held_alone(current) && current.dtype() == g.dtype() &&
             current.device() == g.device()) {
    ops::add_(current, g);
  } else {
    param.set_grad(ops::add(current, g));
  }
}

}  // namespace

void backward(const Tensor& root, const Tensor& grad_root) {
  LT_CHECK(root.defined() && root.requires_grad(),
           "backward() on a tensor that does not require grad: ", root.str());
  Tensor seed = grad_root;
  if (!seed.defined()) {
    LT_CHECK(root.numel() == 1, "backward() without a gradient needs a one-element root, got ",
             root.str());
    seed = Tensor::full(root.shape(), 1.0, root.dtype(), root.device());
  }
  UnitSeedScope unit_seed(grad_root.defined() ? nullptr : seed.impl());
  LT_CHECK(seed.shape() == root.shape(), "backward(): gradient shape ", shape_str(seed.shape()),
           " does not match root ", shape_str(root.shape()));

  NoGradGuard no_grad;  // backward closures must not record a graph of their own

  if (root.is_leaf()) {  // d root / d root
    Tensor g = root.grad().defined() ? ops::add(root.grad(), seed) : seed.clone();
    root.set_grad(g);
    for (const auto& hook : root.grad_ready_hooks()) hook(root);
    return;
  }

  // Discover the graph and count, per node, the edges that lead into it.
  std::shared_ptr<Node> start = root.grad_fn();
  LT_CHECK(start->backward || start->is_leaf_accumulator(),
           "backward() through a graph that was already freed (", start->name,
           "); run the forward again");
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<TensorImpl*, int> accumulators_per_leaf;
  std::vector<Node*> stack{start.get()};
  std::unordered_set<Node*> seen{start.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n->is_leaf_accumulator()) ++accumulators_per_leaf[n->leaf.get()];
    for (const auto& e : n->next) {
      if (!e.node) continue;
      ++dependencies[e.node.get()];
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  auto newer_first = [](const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) {
    return a->sequence < b->sequence;
  };
  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>,
                      decltype(newer_first)>
      ready(newer_first);
  std::unordered_map<Node*, std::vector<Tensor>> pending;  // gradients per output slot
  std::unordered_map<TensorImpl*, Tensor> leaf_sums;
  std::unordered_set<TensorImpl*> handed_to_leaves;
  // The .grads a node added its gradient into (Note [Weight gradients
  // summed by the GEMM]): the leaf's sum is then already done.
  std::unordered_set<const TensorImpl*> summed_in_place;
  const bool sum_in_gemm = autograd::weight_grad_sum_in_gemm();
  // The leaf accumulators that one edge leads into, of leaves with no other
  // accumulator: counted before any node runs (the counts above fall as
  // gradients arrive).
  std::unordered_set<const Node*> sole_paths;
  if (sum_in_gemm) {
    for (const auto& [n, edges] : dependencies) {
      if (n->is_leaf_accumulator() && edges == 1 && accumulators_per_leaf[n->leaf.get()] == 1)
        sole_paths.insert(n);
    }
  }

  pending[start.get()].resize(start->num_outputs);
  pending[start.get()][root.output_index()] = seed;
  ready.push(start);

  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(pending[node.get()]);
    pending.erase(node.get());

    if (node->is_leaf_accumulator()) {
      TensorImpl* leaf = node->leaf.get();
      leaf_sums[leaf] = sum_gradients(leaf_sums[leaf], grads.empty() ? Tensor() : grads[0]);
      if (--accumulators_per_leaf[leaf] == 0) {
        Tensor param(node->leaf);
        Tensor g = leaf_sums[leaf];
        leaf_sums.erase(leaf);
        if (g.defined()) {
          check_gradient_matches(g, *leaf, "backward");
          // Erased as it is consumed: a later tensor at the same address is
          // not one a node summed in place.
          if (summed_in_place.erase(g.impl()) == 0) {
            // One tensor may be the gradient of several leaves (a + b); later
            // in-place edits of one .grad must not reach another.
            if (!handed_to_leaves.insert(g.impl()).second) g = g.clone();
            accumulate_grad(param, g);
          }
          for (const auto& hook : param.grad_ready_hooks()) hook(param);
        }
      }
      node->leaf.reset();
      continue;
    }

    LT_CHECK(node->backward, "backward() through a freed graph at ", node->name);
    std::vector<Tensor> targets;
    if (sum_in_gemm) {
      for (size_t i = 0; i < node->next.size(); ++i) {
        const autograd::Edge& e = node->next[i];
        Tensor t = in_place_sum_target(e, sole_paths);
        if (t.defined()) {
          targets.resize(node->next.size());
          targets[i] = std::move(t);
        }
      }
    }
    std::vector<Tensor> input_grads;
    {
      SumTargetsScope offered(targets.empty() ? nullptr : &targets);
      std::optional<ops::OpProfileScope> profile;
      if (ops::op_profile_enabled())
        profile.emplace(("backward " + node->name).c_str(), device_of(grads), true);
      input_grads = node->backward(grads);
    }
    for (size_t i = 0; i < targets.size() && i < input_grads.size(); ++i) {
      if (targets[i].defined() && input_grads[i].defined() &&
          input_grads[i].impl() == targets[i].impl()) {
        summed_in_place.insert(targets[i].impl());
        ++autograd::sums_in_place;
      }
    }
    LT_CHECK(input_grads.size() == node->next.size(), node->name, " returned ", input_grads.size(),
             " gradients for ", node->next.size(), " inputs");
    std::vector<autograd::Edge> edges = std::move(node->next);
    node->release();
    for (size_t i = 0; i < edges.size(); ++i) {
      const auto& e = edges[i];
      if (!e.node) continue;
      auto& slots = pending[e.node.get()];
      if (slots.empty()) slots.resize(e.node->num_outputs);
      slots[e.input_slot] = sum_gradients(slots[e.input_slot], input_grads[i]);
      if (--dependencies[e.node.get()] == 0) ready.push(e.node);
    }
  }
}

}  // namespace lt
