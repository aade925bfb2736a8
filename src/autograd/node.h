#pragma once
// The tape. Each differentiable op that runs with grad mode on leaves one
// Node behind: the closure that maps output gradients to input gradients,
// the tensors it saved, and an edge per input saying where that input's
// gradient goes next (the input's own Node, or its leaf accumulator).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace lt::autograd {

struct Node;

struct Edge {
  std::shared_ptr<Node> node;  // null: this input needs no gradient
  uint32_t input_slot = 0;     // which output of `node` this gradient belongs to
};

// Maps the gradients of a node's outputs to the gradients of its inputs
// (an undefined Tensor for an input that needs none).
using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grad_outputs)>;

struct Node {
  Node();
  // Frees the graph behind this node iteratively: a long chain of nodes
  // dropped without backward() would otherwise recurse once per node.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  std::string name;
  uint64_t sequence;       // creation order; backward runs newest first
  std::vector<Edge> next;  // one per input
  uint32_t num_outputs = 1;
  BackwardFn backward;  // captures the saved tensors
  // Set for the accumulator of a leaf; then `backward` is unused.
  std::shared_ptr<TensorImpl> leaf;

  bool is_leaf_accumulator() const { return leaf != nullptr; }
  // Drops saved tensors and edges; the graph behind this node can then be freed.
  void release() {
    backward = nullptr;
    next.clear();
  }
};

}  // namespace lt::autograd
