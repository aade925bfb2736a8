#pragma once
// Functions of autograd calls that the fusion pass fuses, for the fused
// programs' GPU test (tests/gpu/fused_programs_gpu_test.cpp): a pre-norm
// block's pattern around two matmuls (three chains) and RoPE followed by a
// scale. Listed once so that a build with MLIR can compile their chains'
// GPU kernels ahead (fused_program_kernel_graphs, with
// LT_PREBUILD_GPU_KERNELS) for the GPU machine, whose build cannot.
#include <functional>
#include <string>
#include <vector>

#include "compile/graph.h"
#include "core/tensor.h"

namespace lt::autograd::testing {

struct FusedProgramCase {
  std::string name;
  std::function<Tensor(const std::vector<Tensor>&)> f;  // of inputs, then constants
  std::vector<Shape> input_shapes;                      // each requires a gradient
  std::vector<double> input_stds;
  std::vector<Tensor> constants;  // f64 CPU tensors f reads (RoPE tables), moved by the caller
};

std::vector<FusedProgramCase> fused_program_cases();

// Copies of `values` that require a gradient (fresh leaves per run).
std::vector<Tensor> leaves(const std::vector<Tensor>& values);

// sum(out * probe), backward: the output and the inputs' gradients.
std::vector<Tensor> output_and_grads(const Tensor& out, const std::vector<Tensor>& inputs,
                                     const Tensor& probe);

// The forward and backward kernel graphs the cases' chains run when traced
// in `dtype` with every input requiring a gradient (traced on the CPU:
// the graphs do not depend on the device).
std::vector<compile::KernelGraph> fused_program_kernel_graphs(DType dtype);

}  // namespace lt::autograd::testing
