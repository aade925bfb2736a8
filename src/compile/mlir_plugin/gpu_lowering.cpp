// The plugin's GPU lowering: a KernelGraph's gpu.func (compile/gpu_mlir.h)
// to PTX through MLIR's NVVM target (compile/mlir_plugin/cpu_jit.cpp and
// this file are the only ones with MLIR's headers). It registers all of
// MLIR's dialects, extensions and passes, as mlir-opt does: the NVVM
// lowering needs interfaces from several of them, and the pipeline below is
// the one checked with mlir-opt-19 (docs/compiler.md).
#include "compile/mlir_plugin/gpu_lowering.h"

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

namespace lt::compile::mlir_plugin {

PtxKernel lower_to_ptx(const KernelGraph& graph, const PtxTarget& target) {
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
  MlirSession session(registry, graph, to_gpu_mlir(graph, target.forms), "GPU kernel");
  mlir::OwningOpRef<mlir::ModuleOp> module = session.parse();

  // The kernel is written as a gpu.func already (no host side to outline):
  // its loops to branches, then NVVM with libdevice for exp, tanh, erf,
  // ..., and PTX text. From sm_80 on, bf16 conversions are one instruction
  // each (cvt.rn.bf16.f32), which LLVM emits for fptrunc and fpext; before,
  // they are expanded to integer ops (7 instructions a rounding).
  const bool native_bf16 =
      target.chip.rfind("sm_", 0) == 0 && std::stoi(target.chip.substr(3)) >= 80;
  const std::string pipeline =
      "nvvm-attach-target{chip=" + target.chip + " features=" + target.features +
      " l=" + target.libdevice + "},gpu.module(convert-scf-to-cf,arith-expand{include-bf16=" +
      (native_bf16 ? "false" : "true") +
      "},"
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
      kernel.form == GpuLaunchForm::Elementwise ? target.forms.elements_per_thread : 1;
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

}  // namespace lt::compile::mlir_plugin
