#pragma once
// For the files built with MLIR only (compile/jit.cpp, compile/ptx.cpp):
// one kernel's MLIR context, the diagnostics it collects, the parsed
// module, and errors that carry all three with the graph's key.
#include <string>

#include "compile/graph.h"
#include "core/error.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

namespace lt::compile {

class MlirSession {
 public:
  // One context per kernel, without MLIR's thread pool: compiles are rare
  // and may run on several threads at once. `what` names the kernel kind
  // in errors ("kernel", "GPU kernel").
  MlirSession(const mlir::DialectRegistry& registry, const KernelGraph& graph, std::string source,
              const char* what)
      : context_(registry, mlir::MLIRContext::Threading::DISABLED),
        handler_(&context_,
                 [this](mlir::Diagnostic& d) {
                   note(d.str());
                   return mlir::success();
                 }),
        graph_(graph),
        source_(std::move(source)),
        what_(what) {}

  mlir::MLIRContext& context() { return context_; }

  mlir::OwningOpRef<mlir::ModuleOp> parse() {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(source_, mlir::ParserConfig(&context_));
    if (!module) fail("parsing the generated MLIR");
    return module;
  }

  void note(const std::string& text) { diagnostics_ += "\n  " + text; }

  [[noreturn]] void fail(const std::string& step) const {
    lt::fail("compile: ", step, " failed for ", what_, " ", graph_.key(), diagnostics_, "\nMLIR:\n",
             source_);
  }

 private:
  mlir::MLIRContext context_;
  std::string diagnostics_;
  mlir::ScopedDiagnosticHandler handler_;
  const KernelGraph& graph_;
  std::string source_;
  const char* what_;
};

}  // namespace lt::compile
