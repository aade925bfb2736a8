#include "compile/compiler_info.h"

#include "compile/plugin_loader.h"

namespace lt::compile {

CompilerInfo compiler_info() {
  const PluginStatus& status = plugin_status();
  CompilerInfo info;
  info.built_in = status.built;
  info.loaded = status.loaded;
  info.plugin = status.path;
  info.error = status.error;
  if (const MlirCompiler* compiler = mlir_compiler()) {
    info.mlir_version = compiler->mlir_version();
    info.targets = compiler->targets();
  }
  return info;
}

}  // namespace lt::compile
