// The CPU lowering and JIT, in the compiler plugin (with compile/ptx.cpp,
// the files that include MLIR's headers; this one takes about 30 s of CPU
// to compile).
#include "compile/mlir_plugin/cpu_jit.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>

#include "compile/mlir_session.h"
#include "compile/to_mlir.h"
#include "core/error.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

namespace lt::compile::mlir_plugin {

namespace {

constexpr const char* kFunctionName = "kernel";
// ExecutionEngine's wrapper of kFunctionName taking void** (lookupPacked).
constexpr const char* kPackedName = "_mlir_kernel";

// One of the two owns the code `packed` points into: the engine that
// compiled it, or the JIT that linked it from a cached object.
class OwnedCode : public JitCode {
 public:
  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::unique_ptr<llvm::orc::LLJIT> linked;
  Entry packed = nullptr;

  Entry entry() const override { return packed; }
};

void initialize_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

std::string to_string(llvm::Error error) {
  std::string text;
  llvm::handleAllErrors(std::move(error),
                        [&](const llvm::ErrorInfoBase& info) { text += info.message(); });
  return text;
}

// Lowers the module from linalg on memrefs to the LLVM dialect. Math goes
// to libm calls (expf, tanhf, ...; the JIT resolves them in this process),
// and bf16 conversions are expanded to integer ops (arith-expand
// include-bf16), as LLVM 19 would otherwise call compiler-rt helpers that
// libgcc may not have.
void add_lowering_passes(mlir::PassManager& pm) {
  pm.addNestedPass<mlir::func::FuncOp>(mlir::createConvertLinalgToLoopsPass());
  pm.addPass(mlir::createConvertMathToLibmPass());
  mlir::arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addNestedPass<mlir::func::FuncOp>(mlir::arith::createArithExpandOpsPass(expand));
  pm.addPass(mlir::createLowerAffinePass());
  pm.addPass(mlir::createConvertSCFToCFPass());
  pm.addPass(mlir::memref::createExpandStridedMetadataPass());
  pm.addPass(mlir::createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(mlir::createConvertMathToLLVMPass());
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createConvertFuncToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
}

// The host's target machine (its CPU and features), for LLVM's optimizer:
// given none, its cost models see a target without vector registers and
// leave every loop scalar; only the code generator would know the host.
std::unique_ptr<llvm::TargetMachine> host_target_machine(MlirSession& session) {
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    session.note(to_string(builder.takeError()));
    session.fail("describing the host CPU");
  }
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
  auto machine = builder->createTargetMachine();
  if (!machine) {
    session.note(to_string(machine.takeError()));
    session.fail("making the host's target machine");
  }
  return std::move(*machine);
}

}  // namespace

std::unique_ptr<JitCode> jit_compile(const KernelGraph& graph, std::string* object) {
  initialize_llvm_once();
  mlir::DialectRegistry registry;
  registry
      .insert<mlir::affine::AffineDialect, mlir::arith::ArithDialect, mlir::cf::ControlFlowDialect,
              mlir::func::FuncDialect, mlir::linalg::LinalgDialect, mlir::LLVM::LLVMDialect,
              mlir::math::MathDialect, mlir::memref::MemRefDialect, mlir::scf::SCFDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  MlirSession session(registry, graph, to_mlir(graph, kFunctionName), "kernel");
  mlir::OwningOpRef<mlir::ModuleOp> module = session.parse();
  mlir::PassManager pm(&session.context());
  add_lowering_passes(pm);
  if (mlir::failed(pm.run(*module))) session.fail("lowering to the LLVM dialect");

  const std::unique_ptr<llvm::TargetMachine> host = host_target_machine(session);
  // Named: options.transformer is a function_ref, which does not keep the
  // function alive (given a temporary, the engine called a dangling
  // reference, and the kernels ran unoptimized).
  const std::function<llvm::Error(llvm::Module*)> optimize =
      mlir::makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0, host.get());
  mlir::ExecutionEngineOptions options;
  options.transformer = optimize;
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Default;
  options.enableGDBNotificationListener = false;
  options.enablePerfNotificationListener = false;
  options.enableObjectDump = object != nullptr;
  auto engine = mlir::ExecutionEngine::create(*module, options);
  if (!engine) {
    session.note(to_string(engine.takeError()));
    session.fail("JIT compilation");
  }
  auto code = std::make_unique<OwnedCode>();
  code->engine = std::move(*engine);
  auto packed = code->engine->lookupPacked(kFunctionName);
  if (!packed) {
    session.note(to_string(packed.takeError()));
    session.fail("finding the compiled kernel");
  }
  code->packed = *packed;

  if (object != nullptr) {
    // The engine writes its object only to a file.
    const std::filesystem::path path =
        std::filesystem::temp_directory_path() /
        ("lazytrain-kernel-" + std::to_string(::getpid()) + "-" +
         std::to_string(reinterpret_cast<uintptr_t>(code.get())) + ".o");
    code->engine->dumpToObjectFile(path.string());
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    *object = bytes.str();
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    if (object->empty()) session.fail("writing the kernel's object file");
  }
  return code;
}

std::unique_ptr<JitCode> jit_load_object(const KernelGraph& graph, const std::string& object) {
  initialize_llvm_once();
  auto refuse = [&](llvm::Error error) {
    fail("compile: loading the cached object of kernel ", graph.key(),
         " failed: ", to_string(std::move(error)));
  };
  auto jit = llvm::orc::LLJITBuilder().create();
  if (!jit) refuse(jit.takeError());
  // malloc, free and libm's expf, tanhf, ... come from this process.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process) refuse(process.takeError());
  (*jit)->getMainJITDylib().addGenerator(std::move(*process));
  if (llvm::Error error =
          (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object, "cached-kernel"))) {
    refuse(std::move(error));
  }
  auto symbol = (*jit)->lookup(kPackedName);
  if (!symbol) refuse(symbol.takeError());
  auto code = std::make_unique<OwnedCode>();
  code->packed = symbol->toPtr<JitCode::Entry>();
  code->linked = std::move(*jit);
  return code;
}

std::string jit_target_id() {
  // "host-tuned": optimized with the host's cost models (host_target_machine),
  // so that objects cached before, scalar, are compiled again.
  return std::string("llvm ") + LLVM_VERSION_STRING + " " + llvm::sys::getProcessTriple() + " " +
         llvm::sys::getHostCPUName().str() + " host-tuned";
}

}  // namespace lt::compile::mlir_plugin
