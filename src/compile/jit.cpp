// The CPU lowering and JIT. With compile/ptx.cpp, the only files that
// include MLIR's headers (they take this file about 30 s of CPU to
// compile). LT_HAVE_MLIR is defined for these two files only
// (src/CMakeLists.txt), so that the other files' compile lines do not
// change with -DLT_MLIR.
#include "compile/jit.h"

#include "compile/to_mlir.h"
#include "core/error.h"

#if LT_HAVE_MLIR
#include <unistd.h>
#include "compile/mlir_session.h"

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
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
#endif

namespace lt::compile {

#if LT_HAVE_MLIR

namespace {
constexpr const char* kFunctionName = "kernel";
// ExecutionEngine's wrapper of kFunctionName taking void** (lookupPacked).
constexpr const char* kPackedName = "_mlir_kernel";
}  // namespace

// One of the two owns the code `packed` points into: the engine that
// compiled it, or the JIT that linked it from a cached object.
struct CpuKernel::Engine {
  std::unique_ptr<mlir::ExecutionEngine> engine;
  std::unique_ptr<llvm::orc::LLJIT> linked;
  void (*packed)(void**) = nullptr;  // the kernel with every argument behind a pointer
};

namespace {

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

std::vector<ShapeClass> parameters_of(const KernelGraph& graph) {
  std::vector<ShapeClass> params;
  for (const InputSpec& in : graph.inputs()) params.push_back(in.shape);
  for (const OutputSpec& out : graph.outputs()) params.push_back(graph.node(out.node).shape);
  return params;
}

CompiledObject compile(const KernelGraph& graph, bool keep_object) {
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

  mlir::ExecutionEngineOptions options;
  options.transformer = mlir::makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0, nullptr);
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Default;
  options.enableGDBNotificationListener = false;
  options.enablePerfNotificationListener = false;
  options.enableObjectDump = keep_object;
  auto engine = mlir::ExecutionEngine::create(*module, options);
  if (!engine) {
    session.note(to_string(engine.takeError()));
    session.fail("JIT compilation");
  }
  auto owned = std::make_unique<CpuKernel::Engine>();
  owned->engine = std::move(*engine);
  auto packed = owned->engine->lookupPacked(kFunctionName);
  if (!packed) {
    session.note(to_string(packed.takeError()));
    session.fail("finding the compiled kernel");
  }
  owned->packed = *packed;

  CompiledObject result;
  if (keep_object) {
    // The engine writes its object only to a file.
    const std::filesystem::path path =
        std::filesystem::temp_directory_path() /
        ("lazytrain-kernel-" + std::to_string(::getpid()) + "-" +
         std::to_string(reinterpret_cast<uintptr_t>(&result)) + ".o");
    owned->engine->dumpToObjectFile(path.string());
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    result.object = bytes.str();
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    if (result.object.empty()) session.fail("writing the kernel's object file");
  }
  result.kernel = std::make_unique<CpuKernel>(std::move(owned), parameters_of(graph));
  return result;
}

}  // namespace

std::unique_ptr<CpuKernel> compile_cpu(const KernelGraph& graph) {
  return compile(graph, false).kernel;
}

CompiledObject compile_cpu_object(const KernelGraph& graph) {
  return compile(graph, true);
}

std::unique_ptr<CpuKernel> load_cpu_object(const KernelGraph& graph, const std::string& object) {
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
  auto owned = std::make_unique<CpuKernel::Engine>();
  owned->packed = symbol->toPtr<void (*)(void**)>();
  owned->linked = std::move(*jit);
  return std::make_unique<CpuKernel>(std::move(owned), parameters_of(graph));
}

std::string cpu_target_id() {
  return std::string("llvm ") + LLVM_VERSION_STRING + " " + llvm::sys::getProcessTriple() + " " +
         llvm::sys::getHostCPUName().str();
}

void CpuKernel::run(int64_t rows, int64_t cols, std::span<void* const> buffers) const {
  LT_CHECK(buffers.size() == params_.size(), "compile: the kernel takes ", params_.size(),
           " buffers (inputs, then outputs), got ", buffers.size());
  LT_CHECK(rows >= 0 && cols >= 0, "compile: rows and cols must be >= 0, got ", rows, " and ",
           cols);
  // The packed calling convention: one pointer per scalar argument of the
  // lowered function, where a memref of rank n is (allocated, aligned,
  // offset, n sizes, n strides).
  union Word {
    void* pointer;
    int64_t integer;
  };
  std::vector<Word> words;
  words.reserve(2 + 7 * params_.size());
  words.push_back({.integer = rows});
  words.push_back({.integer = cols});
  for (size_t i = 0; i < params_.size(); ++i) {
    words.push_back({.pointer = buffers[i]});
    words.push_back({.pointer = buffers[i]});
    words.push_back({.integer = 0});
    switch (params_[i]) {
      case ShapeClass::Full:
        words.push_back({.integer = rows});
        words.push_back({.integer = cols});
        words.push_back({.integer = cols});
        words.push_back({.integer = 1});
        break;
      case ShapeClass::Row:
        words.push_back({.integer = rows});
        words.push_back({.integer = 1});
        break;
      case ShapeClass::Col:
        words.push_back({.integer = cols});
        words.push_back({.integer = 1});
        break;
      case ShapeClass::Scalar:
        fail("compile: a kernel parameter cannot be scalar");
    }
  }
  std::vector<void*> args;
  args.reserve(words.size());
  for (Word& w : words) args.push_back(&w);
  engine_->packed(args.data());
}

#else  // !LT_HAVE_MLIR

struct CpuKernel::Engine {};

std::unique_ptr<CpuKernel> compile_cpu(const KernelGraph& graph) {
  fail("compile: this lazytrain was built without MLIR (-DLT_MLIR=OFF), so kernel ", graph.key(),
       " cannot be compiled");
}

CompiledObject compile_cpu_object(const KernelGraph& graph) {
  return {compile_cpu(graph), {}};
}

std::unique_ptr<CpuKernel> load_cpu_object(const KernelGraph& graph, const std::string&) {
  return compile_cpu(graph);
}

std::string cpu_target_id() {
  return "none (built without MLIR)";
}

void CpuKernel::run(int64_t, int64_t, std::span<void* const>) const {
  fail("compile: this lazytrain was built without MLIR (-DLT_MLIR=OFF)");
}

#endif

CpuKernel::CpuKernel(std::unique_ptr<Engine> engine, std::vector<ShapeClass> params)
    : engine_(std::move(engine)), params_(std::move(params)) {}
CpuKernel::~CpuKernel() = default;

}  // namespace lt::compile
