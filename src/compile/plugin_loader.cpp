#include "compile/plugin_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <system_error>

#include "core/error.h"

namespace lt::compile {
namespace {

// LT_MLIR_PLUGIN_BUILT is defined for this file only, when the build made
// the plugin (src/CMakeLists.txt), so that no other compile line changes.
#ifdef LT_MLIR_PLUGIN_BUILT
constexpr bool kBuilt = true;
#else
constexpr bool kBuilt = false;
#endif

// The file to load, and where that choice came from (for messages).
struct Candidate {
  std::string path;
  const char* from = "";
};

Candidate plugin_candidate() {
  if (const char* env = std::getenv("LT_COMPILER_PLUGIN"); env != nullptr && *env != '\0') {
    return {env, " (from LT_COMPILER_PLUGIN)"};
  }
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return {kMlirPluginFile, " (on the library path)"};
  return {(self.parent_path() / kMlirPluginFile).string(), " (beside the program)"};
}

struct Loaded {
  PluginStatus status;
  MlirCompiler* compiler = nullptr;
};

Loaded load() {
  Loaded out;
  out.status.built = kBuilt;
  const Candidate candidate = plugin_candidate();
  const std::string& path = out.status.path = candidate.path;
  const std::string where = candidate.from;
  if (!kBuilt) {
    out.status.error =
        "this lazytrain was built without MLIR (-DLT_MLIR=OFF, or MLIR 19 not found: "
        "scripts/install-deps.sh), so it has no fusion compiler plugin";
    return out;
  }
  // RTLD_LOCAL: MLIR's and LLVM's symbols stay the plugin's own. Never
  // closed: the compiled kernels' code and destructors live in it.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::string why = ::dlerror();
    // dlerror starts with the file when the file itself is the problem.
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
    out.status.error = "cannot load the fusion compiler plugin " + path + where + ": " + why;
    return out;
  }
  auto factory = reinterpret_cast<MlirCompilerFactory>(::dlsym(handle, kMlirPluginFactory));
  if (factory == nullptr) {
    out.status.error = "the fusion compiler plugin " + path + where + " has no " +
                       kMlirPluginFactory + " (not a lazytrain plugin?)";
    return out;
  }
  out.compiler = factory(LT_VERSION);
  if (out.compiler == nullptr) {
    out.status.error = "the fusion compiler plugin " + path + where +
                       " belongs to another lazytrain version (this one is " LT_VERSION ")";
    return out;
  }
  out.status.loaded = true;
  return out;
}

const Loaded& loaded() {
  static std::once_flag once;
  static Loaded result;
  std::call_once(once, [] { result = load(); });
  return result;
}

}  // namespace

const PluginStatus& plugin_status() {
  return loaded().status;
}

MlirCompiler* mlir_compiler() {
  return loaded().compiler;
}

MlirCompiler& require_mlir_compiler(const std::string& what) {
  const Loaded& l = loaded();
  if (l.compiler == nullptr) fail("compile: ", what, " cannot be compiled: ", l.status.error);
  return *l.compiler;
}

void rethrow_from_plugin(const std::exception& e) {
  fail(e.what());
}

}  // namespace lt::compile
