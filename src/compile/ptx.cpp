// The GPU lowering. Built twice (src/CMakeLists.txt): into the compiler
// plugin with LT_HAVE_MLIR, where compile_ptx lowers with MLIR (with
// compile/mlir_plugin/cpu_jit.cpp, the only files with MLIR's headers);
// and into the program without it, where compile_ptx asks the plugin
// (compile/compiler_plugin.h) and ptx_isa_for runs as it is. It registers
// all of MLIR's dialects, extensions and passes, as mlir-opt does: the
// NVVM lowering needs interfaces from several of them, and the pipeline
// below is the one checked with mlir-opt-19 (docs/compiler.md).
#include "compile/ptx.h"

#include <algorithm>

#include "core/error.h"

#if !LT_HAVE_MLIR
#include "compile/plugin_loader.h"
#endif

#if LT_HAVE_MLIR
#include <mutex>

#include "compile/mlir_session.h"

#include "llvm/Support/TargetSelect.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#endif

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

#if LT_HAVE_MLIR

PtxKernel compile_ptx(const KernelGraph& graph, const PtxTarget& target) {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::registerAllPasses();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  MlirSession session(registry, graph, to_gpu_mlir(graph, target.elements_per_thread),
                      "GPU kernel");
  mlir::OwningOpRef<mlir::ModuleOp> module = session.parse();

  // The kernel is written as a gpu.func already (no host side to outline):
  // its loops to branches, bf16 conversions to integer ops, then NVVM with
  // libdevice for exp, tanh, erf, ..., and PTX text.
  const std::string pipeline =
      "nvvm-attach-target{chip=" + target.chip + " features=" + target.features +
      " l=" + target.libdevice +
      "},gpu.module(convert-scf-to-cf,arith-expand{include-bf16=true},"
      "convert-gpu-to-nvvm{index-bitwidth=64},canonicalize,reconcile-unrealized-casts),"
      "gpu-module-to-binary{format=isa}";
  mlir::PassManager pm(&session.context());  // on the module: the pipeline is what runs inside it
  std::string pipeline_errors;
  llvm::raw_string_ostream errors(pipeline_errors);
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm, errors))) {
    session.note(pipeline_errors);
    session.fail("parsing the GPU pass pipeline");
  }
  if (mlir::failed(pm.run(*module))) session.fail("lowering to PTX");

  PtxKernel kernel;
  kernel.entry = kGpuEntry;
  kernel.form = gpu_launch_form(graph);
  kernel.threads_per_block = kGpuThreadsPerBlock;
  kernel.elements_per_thread =
      kernel.form == GpuLaunchForm::Elementwise ? target.elements_per_thread : 1;
  module->walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute attr : binary.getObjects()) {
      kernel.ptx = llvm::cast<mlir::gpu::ObjectAttr>(attr).getObject().str();
    }
  });
  // The PTX ends with a NUL that ptxas does not take.
  while (!kernel.ptx.empty() && kernel.ptx.back() == '\0') kernel.ptx.pop_back();
  if (kernel.ptx.empty()) session.fail("finding the PTX in the lowered module");
  return kernel;
}

#else  // !LT_HAVE_MLIR: the program's side

PtxKernel compile_ptx(const KernelGraph& graph, const PtxTarget& target) {
  return with_mlir_compiler("GPU kernel " + graph.key(), [&](MlirCompiler& compiler) {
    return compiler.compile_ptx(graph, target);
  });
}

#endif

}  // namespace lt::compile
