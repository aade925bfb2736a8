// The GPU lowering, the program's side: compile_ptx asks the compiler
// plugin (compile/compiler_plugin.h; its MLIR half is
// compile/mlir_plugin/gpu_lowering.cpp), and ptx_isa_for needs no MLIR.
#include "compile/ptx.h"

#include <algorithm>

#include "compile/plugin_loader.h"
#include "core/error.h"

namespace lt::compile {

std::string ptx_isa_for(int cuda_major, int cuda_minor) {
  LT_CHECK(cuda_major >= 11, "compile: ptxas of CUDA ", cuda_major, ".", cuda_minor,
           " is too old (CUDA 11 or newer)");
  constexpr int kLlvmNewest = 85;  // LLVM 19's NVPTX backend writes up to PTX 8.5
  int ptxas_newest = 90;           // CUDA 13.0 reads 9.0; later ones more
  if (cuda_major == 11) ptxas_newest = 70 + std::min(cuda_minor, 8);
  if (cuda_major == 12) ptxas_newest = cuda_minor <= 4 ? 80 + cuda_minor : 85;
  return "+ptx" + std::to_string(std::min(kLlvmNewest, ptxas_newest));
}

PtxKernel compile_ptx(const KernelGraph& graph, const PtxTarget& target) {
  return with_mlir_compiler("GPU kernel " + graph.key(), [&](MlirCompiler& compiler) {
    return compiler.compile_ptx(graph, target);
  });
}

}  // namespace lt::compile
