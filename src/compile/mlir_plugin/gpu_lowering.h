#pragma once
// The plugin's GPU lowering (compile/ptx.h's compile_ptx, done with MLIR
// 19's GPU and NVVM dialects). Plugin-only: includes nothing of MLIR
// itself, but only the plugin links what it calls.
#include "compile/ptx.h"

namespace lt::compile::mlir_plugin {

// Throws lt::Error naming the graph's key and MLIR's diagnostics.
PtxKernel lower_to_ptx(const KernelGraph& graph, const PtxTarget& target);

}  // namespace lt::compile::mlir_plugin
