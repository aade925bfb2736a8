#include "compile/compiler_info.h"

namespace lt::compile {

// LT_MLIR_VERSION is defined for this file only, when MLIR is built in
// (src/CMakeLists.txt).
CompilerInfo compiler_info() {
  CompilerInfo info;
#ifdef LT_MLIR_VERSION
  info.built_in = true;
  info.mlir_version = LT_MLIR_VERSION;
  info.targets = {"cpu"};
#endif
  return info;
}

}  // namespace lt::compile
