#pragma once
// What the fusion compiler can do in this build, for `lazytrain info` and
// for callers deciding whether to compile or run the hand-written kernels.
// Known at build time, so asking loads no MLIR library.
#include <string>
#include <vector>

namespace lt::compile {

struct CompilerInfo {
  bool built_in = false;             // false: built with -DLT_MLIR=OFF or without MLIR found
  std::string mlir_version;          // "19.1.7"
  std::vector<std::string> targets;  // what kernels are compiled for: "cpu" (JIT)
};
CompilerInfo compiler_info();

}  // namespace lt::compile
