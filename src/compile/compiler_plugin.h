#pragma once
// The fusion compiler's MLIR half is a plugin, liblazytrain_mlir.so
// (src/compile/mlir_plugin/), loaded with dlopen on first use
// (compile/plugin_loader.h). lazytrain and the tests link no MLIR or LLVM
// library, so they start on a machine without them (the GPU machine, a
// copied binary) and run the hand-written kernels there.
//
// This header is the whole interface between the two: the plugin exports
// one extern "C" factory that returns an MlirCompiler. Both sides are
// built from the same sources (KernelGraph, PtxKernel and std types cross
// the boundary), so the factory refuses a plugin of another lazytrain
// version. Exceptions thrown inside the plugin reach the caller as
// std::exception; the program's side rethrows them as lt::Error.
#include <memory>
#include <string>
#include <vector>

#include "compile/graph.h"
#include "compile/ptx.h"

namespace lt::compile {

// Machine code the plugin JIT-compiled or linked, alive as long as this
// object (its destructor runs in the plugin, which frees the JIT).
class JitCode {
 public:
  virtual ~JitCode() = default;
  // The kernel with every argument behind a pointer (MLIR's packed calling
  // convention; compile/jit.cpp builds the argument list).
  using Entry = void (*)(void**);
  virtual Entry entry() const = 0;
};

class MlirCompiler {
 public:
  virtual ~MlirCompiler() = default;

  virtual std::string mlir_version() const = 0;  // "19.1.7"
  // What kernels are compiled for: "cpu" (JIT), "ptx" (NVPTX, when the
  // plugin's LLVM has that target).
  virtual std::vector<std::string> targets() const = 0;

  // compile/jit.h's functions, done with MLIR. `object`, when given,
  // receives the machine code as an ELF object for the disk cache.
  virtual std::unique_ptr<JitCode> compile_cpu(const KernelGraph& graph, std::string* object) = 0;
  virtual std::unique_ptr<JitCode> load_cpu_object(const KernelGraph& graph,
                                                   const std::string& object) = 0;
  virtual std::string cpu_target_id() const = 0;

  // compile/ptx.h's compile_ptx.
  virtual PtxKernel compile_ptx(const KernelGraph& graph, const PtxTarget& target) = 0;
};

// The plugin's one exported symbol: returns the compiler (owned by the
// plugin, never freed), or null when `lazytrain_version` is not the one
// the plugin was built as.
inline constexpr const char* kMlirPluginFactory = "lt_mlir_compiler";
using MlirCompilerFactory = MlirCompiler* (*)(const char* lazytrain_version);

// Its file name, looked for beside the program (compile/plugin_loader.h).
inline constexpr const char* kMlirPluginFile = "liblazytrain_mlir.so";

}  // namespace lt::compile
