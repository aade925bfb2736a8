#include "autograd/record.h"

#include "core/grad_mode.h"

namespace lt::autograd {

namespace {

// The accumulator node of a leaf is created once and cached on the leaf's
// autograd metadata... except that caching it there would make the leaf
// own its accumulator and the accumulator own the leaf. So it is created
// per use instead; several accumulators for one leaf are all run by the
// engine, which groups them by leaf (see engine.cpp).
Edge edge_for(const Tensor& input) {
  if (!input.defined() || !input.requires_grad()) return {};
  if (input.grad_fn()) return {input.grad_fn(), input.output_index()};
  auto acc = std::make_shared<Node>();
  acc->name = "AccumulateGrad";
  acc->leaf = input.impl_ptr();
  return {acc, 0};
}

}  // namespace

bool needs_graph(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

bool needs_graph(const std::vector<Tensor>& inputs) {
  if (!GradMode::enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

std::vector<Tensor> record(const char* name, const std::vector<Tensor>& inputs,
                           std::vector<Tensor> outputs, BackwardFn backward) {
  if (!needs_graph(inputs)) return outputs;
  auto node = std::make_shared<Node>();
  node->name = name;
  node->num_outputs = static_cast<uint32_t>(outputs.size());
  node->backward = std::move(backward);
  node->next.reserve(inputs.size());
  for (const Tensor& in : inputs) node->next.push_back(edge_for(in));
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    // Outputs are fresh handles (the forward ran on detached inputs), so
    // setting grad_fn here never rewires a caller's tensor.
    if (outputs[i].defined() && is_floating(outputs[i].dtype())) outputs[i].set_grad_fn(node, i);
  }
  return outputs;
}

Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor output,
              std::function<std::vector<Tensor>(const Tensor& grad_output)> backward) {
  auto outs = record(name, inputs, std::vector<Tensor>{std::move(output)},
                     [bw = std::move(backward)](const std::vector<Tensor>& g) { return bw(g[0]); });
  return outs[0];
}

}  // namespace lt::autograd
