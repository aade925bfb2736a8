#pragma once
// KernelGraph -> PTX for NVIDIA GPUs, through MLIR's GPU and NVVM dialects
// (issue 24's CUDA path): the kernel compile/gpu_mlir.h writes (any graph:
// elementwise, row reductions, row outputs; its argument list is fixed
// there), lowered to NVVM with libdevice and printed as PTX. ptxas turns
// it into a cubin (compile/cubin.h) and compile/gpu_kernel.h launches it.
// Built with MLIR; without it compile_ptx throws, saying so.
#include <string>

#include "compile/gpu_mlir.h"
#include "compile/graph.h"

namespace lt::compile {

struct PtxTarget {
  std::string chip = "sm_90";
  // The PTX ISA version to emit, as MLIR's NVVM target takes it; see
  // ptx_isa_for.
  std::string features = "+ptx85";
  // CUDA's libdevice, which exp, tanh, erf, ... become calls into.
  std::string libdevice = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
  // The forms' layout of a thread's work (compile/gpu_mlir.h); part of the
  // cache key where it differs from the default (GpuKernelCache).
  GpuForms forms;
};

struct PtxKernel {
  std::string ptx;
  std::string entry;  // the kernel's name in `ptx` (kGpuEntry)
  GpuLaunchForm form = GpuLaunchForm::Elementwise;
  int threads_per_block = 0;    // kGpuThreadsPerBlock
  int elements_per_thread = 1;  // the target's, for the elementwise form; else 1
};

// Throws lt::Error naming the graph's key and MLIR's diagnostics.
PtxKernel compile_ptx(const KernelGraph& graph, const PtxTarget& target = {});

// The PTX ISA to emit for a ptxas of CUDA `cuda_major.cuda_minor`: the
// lower of what LLVM 19 writes (up to 8.5) and what that ptxas reads, as
// "+ptxNN" (as Triton picks it). CUDA 11.x reads 7.x, 12.0 to 12.4 read
// 8.0 to 8.4, 12.5 and later 8.5 or newer. Throws below CUDA 11.
std::string ptx_isa_for(int cuda_major, int cuda_minor);

}  // namespace lt::compile
