#pragma once
// The plugin's CPU JIT (compile/jit.h's functions, done with MLIR 19's
// ExecutionEngine and LLVM's ORC JIT). Plugin-only: includes nothing of
// MLIR itself, but only the plugin links what it calls.
#include <memory>
#include <string>

#include "compile/compiler_plugin.h"

namespace lt::compile::mlir_plugin {

// Throws lt::Error naming the graph's key and MLIR's diagnostics.
std::unique_ptr<JitCode> jit_compile(const KernelGraph& graph, std::string* object);
// Throws lt::Error when the object will not link (a damaged cache entry).
std::unique_ptr<JitCode> jit_load_object(const KernelGraph& graph, const std::string& object);
// "llvm 19.1.7 x86_64-pc-linux-gnu znver3": what an object depends on
// besides its graph (the JIT uses the host CPU's features).
std::string jit_target_id();

}  // namespace lt::compile::mlir_plugin
