#pragma once
// How a differentiable function joins the tape: compute the forward on
// detached inputs, then `record` the outputs with the backward closure.
#include <initializer_list>

#include "autograd/node.h"

namespace lt::autograd {

// True when grad mode is on and any input requires grad.
bool needs_graph(std::initializer_list<const Tensor*> inputs);
bool needs_graph(const std::vector<Tensor>& inputs);

// Attaches a node computing input gradients from output gradients. Returns
// the outputs, now with grad_fn set. When no graph is needed, returns them
// untouched and `backward` is dropped.
std::vector<Tensor> record(const char* name, const std::vector<Tensor>& inputs,
                           std::vector<Tensor> outputs, BackwardFn backward);
Tensor record(const char* name, const std::vector<Tensor>& inputs, Tensor output,
              std::function<std::vector<Tensor>(const Tensor& grad_output)> backward);

}  // namespace lt::autograd
