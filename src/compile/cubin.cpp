#include "compile/cubin.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <vector>

#include "core/error.h"

extern char** environ;

namespace lt::compile {
namespace {

namespace fs = std::filesystem;

// A folder of its own under the system's temporary folder, removed with
// everything in it when this goes out of scope.
class ScratchFolder {
 public:
  ScratchFolder() {
    std::string pattern = (fs::temp_directory_path() / "lt_ptxas_XXXXXX").string();
    LT_CHECK(::mkdtemp(pattern.data()) != nullptr, "compile: cannot make a temporary folder ",
             pattern, " for ptxas");
    path_ = pattern;
  }
  ~ScratchFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `argv` (argv[0] searched on PATH) with stdout and stderr into
// `log`; its exit status, or -1 when it did not start or was killed.
int run(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int started = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (started != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// "… release 13.0, V13.0.88" -> 13, 0.
std::optional<Ptxas> probe(const std::string& path) {
  ScratchFolder scratch;
  const fs::path log = scratch.path() / "version";
  if (run({path, "--version"}, log) != 0) return std::nullopt;
  const std::string text = read_file(log);
  const size_t at = text.find("release ");
  if (at == std::string::npos) return std::nullopt;
  Ptxas found;
  found.path = path;
  if (std::sscanf(text.c_str() + at, "release %d.%d", &found.cuda_major, &found.cuda_minor) != 2) {
    return std::nullopt;
  }
  return found;
}

}  // namespace

const Ptxas& find_ptxas() {
  static std::once_flag once;
  static std::optional<Ptxas> found;
  static std::string looked;
  std::call_once(once, [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("LT_PTXAS"); env != nullptr && *env != '\0') {
      candidates.push_back(env);
    }
    candidates.push_back("/usr/local/cuda/bin/ptxas");
    candidates.push_back("ptxas");
    for (const std::string& candidate : candidates) {
      looked += (looked.empty() ? "" : ", ") + candidate;
      if ((found = probe(candidate))) return;
    }
  });
  LT_CHECK(found.has_value(), "compile: no ptxas runs (looked for $LT_PTXAS, then ", looked,
           "); CUDA's ptxas turns the GPU kernels' PTX into cubins");
  return *found;
}

std::string assemble_cubin(const std::string& ptx, const std::string& chip) {
  const Ptxas& ptxas = find_ptxas();
  ScratchFolder scratch;
  const fs::path source = scratch.path() / "kernel.ptx", cubin = scratch.path() / "kernel.cubin",
                 log = scratch.path() / "log";
  {
    std::ofstream out(source, std::ios::binary);
    out << ptx;
    LT_CHECK(out.flush(), "compile: cannot write ", source.string(), " for ptxas");
  }
  const int status = run({ptxas.path, "-arch=" + chip, source.string(), "-o", cubin.string()}, log);
  LT_CHECK(status == 0, "compile: ", ptxas.path, " -arch=", chip, " refused the PTX (exit ", status,
           "):\n", read_file(log));
  std::string binary = read_file(cubin);
  LT_CHECK(!binary.empty(), "compile: ", ptxas.path, " wrote no cubin");
  return binary;
}

}  // namespace lt::compile
