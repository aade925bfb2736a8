#include "autograd/fused_chain.h"

#include <algorithm>

#include "autograd/record.h"
#include "compile/chains.h"
#include "compile/gradient.h"
#include "compile/tensor_call.h"
#include "core/error.h"
#include "ops/op_profile.h"

namespace lt::autograd {
namespace {

using compile::KernelGraph;
using compile::ShapeClass;
using compile::Value;

// One call in the IR, computed in f32 (the rounding to the chain's dtype
// is the caller's).
Value emit_call(KernelGraph& g, const CallNode& n, const std::vector<Value>& in) {
  const std::string& fn = n.fn;
  auto number = [&](size_t i) {
    LT_CHECK(i < n.numbers.size(), "fusion: ", fn, " was traced without its number ", i);
    return n.numbers[i];
  };
  if (fn == "add" || fn == "bias_add") return g.add(in[0], in[1]);
  if (fn == "sub") return g.sub(in[0], in[1]);
  if (fn == "mul") return g.mul(in[0], in[1]);
  if (fn == "div") return g.div(in[0], in[1]);
  if (fn == "scale") return g.mul(in[0], g.constant(number(0)));
  if (fn == "silu") return g.mul(in[0], g.sigmoid(in[0]));
  if (fn == "swiglu") return g.mul(g.mul(in[0], g.sigmoid(in[0])), in[1]);
  if (fn == "gelu_tanh") return compile::gelu_tanh(g, in[0]);  // as x sigmoid(2u)
  if (fn == "rms_norm") {
    const Value x = in[0];
    const Value rstd = g.rsqrt(g.add(g.row_mean(g.mul(x, x)), g.constant(number(0))));
    return g.mul(in[1], g.mul(x, rstd));
  }
  if (fn == "layer_norm") {
    const Value x = in[0];
    const Value centered = g.sub(x, g.row_mean(x));
    const Value rstd = g.rsqrt(g.add(g.row_mean(g.mul(centered, centered)), g.constant(number(0))));
    Value y = g.mul(centered, rstd);
    if (in.size() > 1 && in[1].id >= 0) y = g.mul(y, in[1]);
    if (in.size() > 2 && in[2].id >= 0) y = g.add(y, in[2]);
    return y;
  }
  fail("fusion: ", fn, " has no kernel form");
}

}  // namespace

KernelGraph chain_kernel_graph(const CallGraph& graph, const FusionPlan& plan, int32_t chain) {
  const FusedChain& c = plan.chains.at(static_cast<size_t>(chain));
  const int32_t first_out = graph.nodes[static_cast<size_t>(c.nodes.front())].output;
  const Shape& space = graph.shapes[static_cast<size_t>(first_out)];
  const DType dtype = graph.dtypes[static_cast<size_t>(first_out)];
  KernelGraph g;
  std::vector<Value> value(graph.shapes.size());
  for (int32_t v : chain_inputs(graph, c)) {
    const bool full = graph.shapes[static_cast<size_t>(v)] == space;
    value[static_cast<size_t>(v)] =
        g.input(full ? ShapeClass::Full : ShapeClass::Col, graph.dtypes[static_cast<size_t>(v)]);
  }
  for (int32_t m : c.nodes) {
    const CallNode& n = graph.nodes[static_cast<size_t>(m)];
    std::vector<Value> in;
    for (int32_t v : n.inputs) in.push_back(v < 0 ? Value{} : value[static_cast<size_t>(v)]);
    Value out = emit_call(g, n, in);
    if (dtype != DType::F32) out = g.cast(out, dtype);
    value[static_cast<size_t>(n.output)] = out;
  }
  for (int32_t v : chain_outputs(graph, plan, chain))
    g.output(value[static_cast<size_t>(v)], dtype);
  return g;
}

FusedChainKernel::FusedChainKernel(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                                   compile::KernelCache& cache, Device device)
    : cache_(cache), device_(device), forward_(chain_kernel_graph(graph, plan, chain)) {
  inputs_ = chain_inputs(graph, plan.chains.at(static_cast<size_t>(chain)));
  outputs_ = chain_outputs(graph, plan, chain);
  LT_CHECK(!outputs_.empty(), "fusion: chain ", chain, " has no output that is read");
  for (int32_t v : inputs_) {
    input_shapes_.push_back(graph.shapes[static_cast<size_t>(v)]);
    input_dtypes_.push_back(graph.dtypes[static_cast<size_t>(v)]);
  }
  for (int32_t v : outputs_) output_shapes_.push_back(graph.shapes[static_cast<size_t>(v)]);
  name_ = "fused_chain";
  for (int32_t m : plan.chains.at(static_cast<size_t>(chain)).nodes) {
    name_ += (m == plan.chains.at(static_cast<size_t>(chain)).nodes.front() ? " " : "+") +
             graph.nodes[static_cast<size_t>(m)].fn;
  }
  forward_name_ = "forward " + name_;
  forward_kernel_ = compile::kernel_for(cache_, forward_, device_);
}

const compile::DeviceKernel& FusedChainKernel::backward_kernel(
    const std::vector<bool>& needs) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = backward_.find(needs);
  if (it == backward_.end()) {
    // Gradients in the activations' dtype (bf16 on a GPU): no f32 copies
    // of them around the kernel (compile/gradient.h).
    KernelGraph graph =
        compile::gradient_graph(forward_, needs, compile::GradientStorage::AsTheForward);
    compile::DeviceKernel kernel = compile::kernel_for(cache_, graph, device_);
    it = backward_.emplace(needs, std::make_pair(std::move(graph), std::move(kernel))).first;
  }
  return it->second.second;
}

std::vector<Tensor> FusedChainKernel::run(const std::vector<Tensor>& inputs) const {
  LT_CHECK(inputs.size() == inputs_.size(), "fusion: the chain takes ", inputs_.size(),
           " inputs, got ", inputs.size());
  std::vector<Tensor> saved;
  std::vector<bool> needs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    LT_CHECK(inputs[i].shape() == input_shapes_[i] && inputs[i].dtype() == input_dtypes_[i],
             "fusion: chain input ", i, " is ", inputs[i].str(), ", traced as another shape");
    saved.push_back(inputs[i].detach().contiguous());
    needs.push_back(inputs[i].requires_grad());
  }
  std::vector<Tensor> outputs;
  {
    ops::OpProfileScope profile(forward_name_.c_str(), device_);
    outputs = compile::call(forward_kernel_, forward_, saved);
  }
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i] = outputs[i].reshape(output_shapes_[i]);
  if (!needs_graph(inputs)) return outputs;
  return record(name_.c_str(), inputs, std::move(outputs),
                [self = shared_from_this(), saved, needs](const std::vector<Tensor>& grads) {
                  return self->backward(saved, needs, grads);
                });
}

std::vector<Tensor> FusedChainKernel::backward(const std::vector<Tensor>& saved,
                                               const std::vector<bool>& needs,
                                               const std::vector<Tensor>& grad_outputs) const {
  const compile::DeviceKernel& kernel = backward_kernel(needs);
  const KernelGraph* graph = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    graph = &backward_.at(needs).first;
  }
  std::vector<Tensor> args = saved;
  for (size_t i = 0; i < output_shapes_.size(); ++i) {
    const Tensor& g = i < grad_outputs.size() ? grad_outputs[i] : Tensor();
    // Read in the output's stored dtype, as the graph takes it.
    const DType stored = forward_.outputs()[i].dtype;
    args.push_back(g.defined() ? (g.dtype() == stored ? g : g.to(stored)).contiguous()
                               : Tensor::zeros(output_shapes_[i], stored, device_));
  }
  std::vector<Tensor> computed = compile::call(kernel, *graph, args);
  std::vector<Tensor> grads(saved.size());
  size_t next = 0;
  for (size_t i = 0; i < saved.size(); ++i) {
    if (!needs[i]) continue;
    const Tensor& g = computed.at(next++);
    const Shape& shape = input_shapes_[i];
    // A full input's gradient comes in its own dtype already, a [cols]
    // input's summed over the rows in the kernel, in f32.
    grads[i] =
        g.dtype() == input_dtypes_[i] ? g.reshape(shape) : g.reshape(shape).to(input_dtypes_[i]);
  }
  return grads;
}

}  // namespace lt::autograd
