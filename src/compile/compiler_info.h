#pragma once
// What the fusion compiler can do here, for `lazytrain info`, train.compile
// and the tests: whether this build made the compiler plugin
// (compile/compiler_plugin.h) and, asking it, whether it loads and what
// it compiles for. Asking loads the plugin (libMLIR and libLLVM) once.
#include <string>
#include <vector>

namespace lt::compile {

struct CompilerInfo {
  bool built_in = false;             // the plugin was built (LT_MLIR on and MLIR 19 found)
  bool loaded = false;               // and it loaded in this process
  std::string plugin;                // the plugin file loaded or looked for
  std::string error;                 // why it did not load (the file, dlerror)
  std::string mlir_version;          // "19.1.7" (empty when not loaded)
  std::vector<std::string> targets;  // what kernels are compiled for: "cpu" (JIT), "ptx"
};
CompilerInfo compiler_info();

}  // namespace lt::compile
