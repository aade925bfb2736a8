#pragma once
// A stage's forward, traced once (autograd/trace.h), turned into a program
// whose fusable chains (autograd/fusion_pass.h) run as compiled kernels
// (autograd/fused_chain.h) and whose other calls run as traced. Built once
// per graph shape (the caller keys programs by input shape, dtype, grad
// mode), it replays the stage on new tensors of the same shapes.
//
// What a trace may read: the `external` tensors the caller passes again on
// every run (the stage's input and parameters), and what earlier traced
// calls returned. A trace that reads anything else (a tensor made by code
// outside autograd/functions.h) cannot be replayed: building throws,
// naming the call, and the caller runs that stage as before.
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "autograd/chain_choice.h"
#include "autograd/fused_chain.h"
#include "autograd/fused_rope.h"
#include "autograd/fusion_pass.h"
#include "autograd/trace.h"

namespace lt::autograd {

// The call graph of a trace: values 0 .. external.size() - 1 are the
// external tensors, then one per call output; a linear call with a bias
// becomes a linear call without it and a "bias_add". `output` must be a
// traced call's result. `again` receives, per node, how to run it.
// `biased`: trace calls whose linear keeps its bias (not split).
CallGraph call_graph(const CallTrace& trace, const std::vector<Tensor>& external,
                     const Tensor& output, std::vector<CallAgain>* again = nullptr,
                     int32_t* output_value = nullptr, const std::set<size_t>& biased = {});

// The graph a FusedProgram runs and its fusion plan: call_graph's, where a
// linear keeps its bias when the bias_add alone would be a chain (its GEMM
// adds the bias and sums its gradient in the epilogue).
std::pair<CallGraph, FusionPlan> planned_call_graph(const CallTrace& trace,
                                                    const std::vector<Tensor>& external,
                                                    const Tensor& output,
                                                    std::vector<CallAgain>* again = nullptr,
                                                    int32_t* output_value = nullptr);

// The kernel graphs a FusedProgram of this trace compiles while training:
// each chain's forward and its backward with every input needing a
// gradient (a rotary chain: x's halves, not the tables), as when every
// external tensor but the RoPE tables requires one. The graphs do not
// depend on the device, so a CPU trace lists a CUDA run's kernels: for
// filling a cache folder ahead for a machine that cannot compile
// (docs/compiler.md, "Kernels for a machine without MLIR").
std::vector<compile::KernelGraph> program_kernel_graphs(const CallTrace& trace,
                                                        const std::vector<Tensor>& external,
                                                        const Tensor& output);

class FusedProgram {
 public:
  // Compiles every chain's forward through `cache` (which must outlive
  // the program and the tapes its runs record). With a `chooser`, a chain
  // it finds faster as calls (autograd/chain_choice.h) runs as traced
  // instead, a split linear bias of it back in its linear.
  FusedProgram(const CallTrace& trace, const std::vector<Tensor>& external, const Tensor& output,
               compile::KernelCache& cache, ChainChooser* chooser = nullptr);

  // The stage's result for `external` (same order, shapes and dtypes as
  // when traced).
  Tensor run(const std::vector<Tensor>& external) const;

  const CallGraph& graph() const { return graph_; }
  const FusionPlan& plan() const { return plan_; }
  // Calls that run inside chains.
  int64_t fused_calls() const;
  // Chains the chooser found faster as calls, which run as traced.
  int64_t chains_run_as_calls() const { return chains_run_as_calls_; }

 private:
  // Filled with graph_ by planned_call_graph.
  std::vector<CallAgain> again_;
  int32_t output_value_ = -1;
  CallGraph graph_;
  FusionPlan plan_;
  std::vector<std::shared_ptr<ChainKernel>> chains_;
  std::vector<std::vector<int32_t>> release_after_;  // per schedule step: values read last there
  int32_t external_count_ = 0;
  int64_t chains_run_as_calls_ = 0;
};

}  // namespace lt::autograd
