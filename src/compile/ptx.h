#pragma once
// KernelGraph -> PTX for NVIDIA GPUs, through MLIR's GPU and NVVM dialects
// (issue 24's CUDA path, first step). Elementwise graphs with full outputs
// only, one kernel: a graph with a row reduction is refused (a reduction
// needs one row per block and a tree across its threads, not yet written),
// and so is one with a row output (a second kernel). Nothing here launches
// a kernel: turning the PTX into a cubin (ptxas) and launching it with the
// CUDA driver API is left (docs/compiler.md). Built with MLIR; without it
// compile_ptx throws, saying so.
#include <string>

#include "compile/graph.h"

namespace lt::compile {

struct PtxTarget {
  std::string chip = "sm_90";
  // The PTX ISA version to emit, as MLIR's NVVM target takes it; see
  // ptx_isa_for.
  std::string features = "+ptx85";
  // CUDA's libdevice, which exp, tanh, erf, ... become calls into.
  std::string libdevice = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
};

struct PtxKernel {
  std::string ptx;
  std::string entry;  // the kernel's name in `ptx`
  // Threads per block along the columns; a block covers one row and this
  // many columns (the grid is rows x ceil(cols / this)).
  int threads_per_block = 0;
};

// Throws lt::Error naming the graph's key and MLIR's diagnostics.
PtxKernel compile_ptx(const KernelGraph& graph, const PtxTarget& target = {});

// The PTX ISA to emit for a ptxas of CUDA `cuda_major.cuda_minor`: the
// lower of what LLVM 19 writes (up to 8.5) and what that ptxas reads, as
// "+ptxNN" (as Triton picks it). CUDA 11.x reads 7.x, 12.0 to 12.4 read
// 8.0 to 8.4, 12.5 and later 8.5 or newer. Throws below CUDA 11.
std::string ptx_isa_for(int cuda_major, int cuda_minor);

}  // namespace lt::compile
