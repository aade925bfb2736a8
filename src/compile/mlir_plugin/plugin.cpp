// The compiler plugin's entry point (compile/compiler_plugin.h): the one
// symbol liblazytrain_mlir.so exports (the rest is built with hidden
// visibility, so its copies of KernelGraph's code and MLIR's stay its own).
#include <cstring>
#include <type_traits>

#include "compile/compiler_plugin.h"
#include "compile/mlir_plugin/cpu_jit.h"
#include "compile/mlir_plugin/gpu_lowering.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"

namespace lt::compile::mlir_plugin {
namespace {

bool has_nvptx() {
  static const bool found = [] {
    LLVMInitializeNVPTXTargetInfo();
    std::string ignored;
    return llvm::TargetRegistry::lookupTarget("nvptx64-nvidia-cuda", ignored) != nullptr;
  }();
  return found;
}

class Mlir19Compiler final : public MlirCompiler {
 public:
  std::string mlir_version() const override { return LLVM_VERSION_STRING; }

  std::vector<std::string> targets() const override {
    std::vector<std::string> targets = {"cpu"};
    if (has_nvptx()) targets.push_back("ptx");
    return targets;
  }

  std::unique_ptr<JitCode> compile_cpu(const KernelGraph& graph, std::string* object) override {
    return jit_compile(graph, object);
  }
  std::unique_ptr<JitCode> load_cpu_object(const KernelGraph& graph,
                                           const std::string& object) override {
    return jit_load_object(graph, object);
  }
  std::string cpu_target_id() const override { return jit_target_id(); }

  PtxKernel compile_ptx(const KernelGraph& graph, const PtxTarget& target) override {
    return lower_to_ptx(graph, target);
  }
};

}  // namespace
}  // namespace lt::compile::mlir_plugin

extern "C" __attribute__((visibility("default"))) lt::compile::MlirCompiler* lt_mlir_compiler(
    const char* lazytrain_version) {
  if (lazytrain_version == nullptr || std::strcmp(lazytrain_version, LT_VERSION) != 0) {
    return nullptr;
  }
  static lt::compile::mlir_plugin::Mlir19Compiler compiler;
  return &compiler;
}

static_assert(std::is_same_v<decltype(&lt_mlir_compiler), lt::compile::MlirCompilerFactory>,
              "the factory must have the type the loader casts it to");
