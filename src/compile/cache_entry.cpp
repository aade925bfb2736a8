#include "compile/cache_entry.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace lt::compile {
namespace {

constexpr const char* kMagic = "lazytrain kernel 1";

// FNV-1a, 64 bits: names entries and checks their bytes. Not a defence
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

}  // namespace

std::filesystem::path cache_entry_path(const std::string& folder, const std::string& key,
                                       const char* extension) {
  return std::filesystem::path(folder) / (hex(fnv1a(key)) + extension);
}

std::optional<std::string> read_cache_entry(const std::filesystem::path& path,
                                            const std::string& key, bool& damaged) {
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
  std::string bytes(size, '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size))) return std::nullopt;
  if (in.peek() != std::char_traits<char>::eof()) return std::nullopt;  // trailing bytes
  if (checksum != hex(fnv1a(bytes))) return std::nullopt;
  damaged = false;
  return bytes;
}

void write_cache_entry(const std::filesystem::path& path, const std::string& key,
                       const std::string& bytes) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  const std::filesystem::path temporary = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out << kMagic << '\n' << key << '\n' << bytes.size() << '\n' << hex(fnv1a(bytes)) << '\n';
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      out.close();
      std::filesystem::remove(temporary, error);
      return;
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) std::filesystem::remove(temporary, error);
}

}  // namespace lt::compile
