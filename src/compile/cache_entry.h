#pragma once
// One kernel's file in a kernel cache folder (compile/kernel_cache.h for
// CPU objects, compile/gpu_kernel_cache.h for cubins): a text header (a
// magic line, the key it was built from, the size, an FNV-1a checksum)
// and the bytes. An entry that does not read back whole is reported as
// damaged, for the caller to rebuild; one is never trusted half-read.
#include <filesystem>
#include <optional>
#include <string>

namespace lt::compile {

// <folder>/<hash of key><extension> (extension with its dot: ".kernel").
std::filesystem::path cache_entry_path(const std::string& folder, const std::string& key,
                                       const char* extension);

// The bytes stored for `key` at `path`, or nothing: `damaged` is false
// when there is no entry, true when there is one that is not whole (other
// key, size, checksum, trailing bytes).
std::optional<std::string> read_cache_entry(const std::filesystem::path& path,
                                            const std::string& key, bool& damaged);

// Written to a temporary name and renamed, so that a reader sees the old
// entry or the whole new one. A folder that cannot be written leaves the
// cache in memory only (the kernel still runs).
void write_cache_entry(const std::filesystem::path& path, const std::string& key,
                       const std::string& bytes);

}  // namespace lt::compile
