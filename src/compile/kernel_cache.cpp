#include "compile/kernel_cache.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/error.h"

namespace lt::compile {
namespace {

constexpr const char* kMagic = "lazytrain kernel 1";

// FNV-1a, 64 bits: names entries and checks their objects. Not a defence
// against anyone writing the folder on purpose, only against damage.
uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The key of an entry on disk: the graph and what its object depends on.
std::string disk_key(const KernelGraph& graph) {
  return graph.key() + " | " + cpu_target_id();
}

std::filesystem::path entry_path(const std::string& folder, const std::string& key) {
  return std::filesystem::path(folder) / (hex(fnv1a(key)) + ".kernel");
}

// The object stored for `key`, or nothing when the entry is missing or does
// not read back whole.
std::optional<std::string> read_entry(const std::filesystem::path& path, const std::string& key,
                                      bool& damaged) {
  damaged = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  damaged = true;
  std::string magic, stored_key, size_line, checksum;
  if (!std::getline(in, magic) || magic != kMagic) return std::nullopt;
  if (!std::getline(in, stored_key) || stored_key != key) return std::nullopt;
  if (!std::getline(in, size_line) || !std::getline(in, checksum)) return std::nullopt;
  char* end = nullptr;
  const unsigned long long size = std::strtoull(size_line.c_str(), &end, 10);
  if (end == size_line.c_str() || *end != '\0' || size == 0 || size > (1ull << 30)) {
    return std::nullopt;
  }
  std::string object(size, '\0');
  if (!in.read(object.data(), static_cast<std::streamsize>(size))) return std::nullopt;
  if (in.peek() != std::char_traits<char>::eof()) return std::nullopt;  // trailing bytes
  if (checksum != hex(fnv1a(object))) return std::nullopt;
  damaged = false;
  return object;
}

// Written to a temporary name and renamed, so that a reader sees the old
// entry or the whole new one. A folder that cannot be written leaves the
// cache in memory only (the kernel still runs).
void write_entry(const std::filesystem::path& path, const std::string& key,
                 const std::string& object) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  const std::filesystem::path temporary = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out << kMagic << '\n' << key << '\n' << object.size() << '\n' << hex(fnv1a(object)) << '\n';
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    if (!out.flush()) {
      out.close();
      std::filesystem::remove(temporary, error);
      return;
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) std::filesystem::remove(temporary, error);
}

}  // namespace

KernelCache::KernelCache(std::string folder) : folder_(std::move(folder)) {}

std::string KernelCache::default_folder() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/lazytrain/kernels";
  const char* home = std::getenv("HOME");
  LT_CHECK(home != nullptr && *home != '\0',
           "compile: neither XDG_CACHE_HOME nor HOME is set, so the kernel cache has no folder");
  return std::string(home) + "/.cache/lazytrain/kernels";
}

std::unique_ptr<CpuKernel> KernelCache::from_disk_or_compile(const KernelGraph& graph) {
  const auto compile_timed = [&](bool keep_object) {
    const auto start = std::chrono::steady_clock::now();
    CompiledObject compiled =
        keep_object ? compile_cpu_object(graph) : CompiledObject{compile_cpu(graph), {}};
    stats_.compile_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++stats_.compiled;
    return compiled;
  };
  if (folder_.empty()) return compile_timed(false).kernel;

  const std::string key = disk_key(graph);
  const std::filesystem::path path = entry_path(folder_, key);
  bool damaged = false;
  if (std::optional<std::string> object = read_entry(path, key, damaged)) {
    try {
      std::unique_ptr<CpuKernel> kernel = load_cpu_object(graph, *object);
      ++stats_.loaded_from_disk;
      return kernel;
    } catch (const Error&) {
      damaged = true;  // a whole entry whose object will not link: rebuild it
    }
  }
  if (damaged) ++stats_.rebuilt;
  CompiledObject compiled = compile_timed(true);
  write_entry(path, key, compiled.object);
  return std::move(compiled.kernel);
}

std::shared_ptr<const CpuKernel> KernelCache::get(const KernelGraph& graph) {
  const std::string key = graph.key();
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = kernels_.find(key); it != kernels_.end()) {
    ++stats_.memory_hits;
    return it->second;
  }
  std::shared_ptr<const CpuKernel> kernel = from_disk_or_compile(graph);
  kernels_.emplace(key, kernel);
  return kernel;
}

KernelCacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace lt::compile
