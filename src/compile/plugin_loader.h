#pragma once
// Finds and loads the fusion compiler's plugin (compile/compiler_plugin.h)
// the first time something asks for it, once per process: nothing loads
// libMLIR and libLLVM before a kernel is compiled or `lazytrain info`
// asks. Where it looks:
//   - $LT_COMPILER_PLUGIN, when set: that file only (tests point it at a
//     missing or damaged file to run as a machine without MLIR would);
//   - beside the running program (/proc/self/exe): the build folder, where
//     lazytrain and the test programs lie, and the installed bin/.
#include <exception>
#include <string>

#include "compile/compiler_plugin.h"

namespace lt::compile {

struct PluginStatus {
  bool built = false;   // this lazytrain was built with MLIR, so with the plugin
  bool loaded = false;  // it loaded (and its version matched)
  std::string path;     // the file loaded, or the one looked for
  std::string error;    // why not: the file looked for and dlerror, or "not built"
};

// Loads on the first call; later calls return the same answer.
const PluginStatus& plugin_status();

// The loaded compiler, or null (plugin_status says why).
MlirCompiler* mlir_compiler();

// The loaded compiler; throws lt::Error saying that `what` cannot be
// compiled, and why, when there is none.
MlirCompiler& require_mlir_compiler(const std::string& what);

// An exception thrown inside the plugin, as an lt::Error with its message
// (its type's identity need not survive the library boundary).
[[noreturn]] void rethrow_from_plugin(const std::exception& e);

// Runs `call` on the compiler for `what`, any exception thrown inside the
// plugin rethrown as an lt::Error.
template <typename Call>
auto with_mlir_compiler(const std::string& what, Call&& call) {
  MlirCompiler& compiler = require_mlir_compiler(what);
  try {
    return call(compiler);
  } catch (const std::exception& e) {
    rethrow_from_plugin(e);
  }
}

}  // namespace lt::compile
