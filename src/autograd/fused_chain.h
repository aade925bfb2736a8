#pragma once
// One chain of the fusion pass (autograd/fusion_pass.h) as compiled kernels:
// the chain's calls written in the compiler's IR (compile/graph.h), one
// forward kernel, and a backward kernel per set of inputs that need a
// gradient (compile/gradient.h), compiled on first use through the kernel
// cache. On the tape the chain is one node, "fused_chain" and its calls
// ("fused_chain add+layer_norm": LT_OP_PROFILE's class), which saves only
// the chain's inputs (the backward kernel recomputes the rest).
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/fusion_pass.h"
#include "compile/gpu_kernel.h"
#include "compile/graph.h"
#include "compile/kernel_cache.h"
#include "core/tensor.h"

namespace lt::autograd {

// The chain's forward as a kernel graph: inputs as chain_inputs (full
// values of the chain's shape, or [cols] vectors), outputs as
// chain_outputs, each stored in the chain's dtype. A bf16 chain rounds each
// call's result to bf16, as the calls do one by one.
compile::KernelGraph chain_kernel_graph(const CallGraph& graph, const FusionPlan& plan,
                                        int32_t chain);

// What a program runs for a chain: its kernels, and the call graph's
// values it reads and writes.
class ChainKernel {
 public:
  virtual ~ChainKernel() = default;
  const std::vector<int32_t>& input_values() const { return inputs_; }
  const std::vector<int32_t>& output_values() const { return outputs_; }
  // `inputs` in input_values() order (on the traced device); returns the outputs in
  // output_values() order, recorded as one node when a gradient is needed.
  virtual std::vector<Tensor> run(const std::vector<Tensor>& inputs) const = 0;

 protected:
  std::vector<int32_t> inputs_, outputs_;
};

class FusedChainKernel : public ChainKernel, public std::enable_shared_from_this<FusedChainKernel> {
 public:
  // Compiles the forward now for `device` (the traced tensors'; through
  // `cache`, which must outlive this). Runs on tensors of that device.
  FusedChainKernel(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                   compile::KernelCache& cache, Device device = Device::cpu());

  const compile::KernelGraph& forward_graph() const { return forward_; }
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const override;

 private:
  const compile::DeviceKernel& backward_kernel(const std::vector<bool>& needs) const;
  std::vector<Tensor> backward(const std::vector<Tensor>& saved, const std::vector<bool>& needs,
                               const std::vector<Tensor>& grad_outputs) const;

  compile::KernelCache& cache_;
  Device device_;
  compile::KernelGraph forward_;
  compile::DeviceKernel forward_kernel_;
  std::vector<Shape> input_shapes_, output_shapes_;
  std::vector<DType> input_dtypes_;
  std::string name_;          // the tape node's
  std::string forward_name_;  // LT_OP_PROFILE's class of the forward
  mutable std::mutex mutex_;
  mutable std::map<std::vector<bool>, std::pair<compile::KernelGraph, compile::DeviceKernel>>
      backward_;
};

}  // namespace lt::autograd
