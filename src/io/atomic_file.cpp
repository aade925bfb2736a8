#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace lt::io {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

constexpr const char* kTempMark = ".tmp-";

// Distinct per process and per call, so concurrent writers of the same
// target (threads or processes) never share a temporary file. The name's
// layout is what is_atomic_temp_name recognises.
std::filesystem::path temp_path_for(const std::filesystem::path& target, int attempt) {
  static std::atomic<uint64_t> counter{0};
  std::string name = "." + target.filename().string() + kTempMark + std::to_string(::getpid()) +
                     "-" + std::to_string(counter.fetch_add(1)) + "-" + std::to_string(attempt);
  return target.parent_path() / name;
}

// Whether `text` is `count` runs of decimal digits joined by '-'.
bool is_numbers(std::string_view text, int count) {
  for (int i = 0; i < count; ++i) {
    const size_t digits = std::min(text.find('-'), text.size());
    if (digits == 0 || !std::all_of(text.begin(), text.begin() + static_cast<ptrdiff_t>(digits),
                                    [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    text.remove_prefix(digits);
    if (i + 1 < count) {
      if (text.empty()) return false;
      text.remove_prefix(1);  // the '-'
    }
  }
  return text.empty();
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target) : target_(std::move(target)) {
  LT_CHECK(!target_.filename().empty(), "cannot write '", target_.string(), "': not a file name");
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    temp_ = temp_path_for(target_, attempt);
    // 0666 filtered by the umask gives the permissions a plain create would.
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) {
    fail("cannot write '", target_.string(), "': creating temporary file '", temp_.string(),
         "' failed: ", errno_text());
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t nbytes) {
  LT_CHECK(fd_ >= 0 && !committed_, "write to '", target_.string(), "' after commit");
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    // Large single writes are split: some kernels cap one write near 2 GiB.
    size_t chunk = std::min<size_t>(nbytes, size_t{1} << 30);
    ssize_t n = ::write(fd_, p, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write '", target_.string(), "': write failed after ", written_,
           " bytes: ", errno_text());
    }
    p += n;
    nbytes -= static_cast<size_t>(n);
    written_ += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::write_at(uint64_t offset, const void* data, size_t nbytes) {
  LT_CHECK(fd_ >= 0 && !committed_, "write to '", target_.string(), "' after commit");
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    const size_t chunk = std::min<size_t>(nbytes, size_t{1} << 30);
    const ssize_t n = ::pwrite(fd_, p, chunk, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write '", target_.string(), "': write at byte ", offset,
           " failed: ", errno_text());
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    nbytes -= static_cast<size_t>(n);
    written_ += static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  LT_CHECK(fd_ >= 0 && !committed_, "commit of '", target_.string(), "' twice");
  if (::fsync(fd_) != 0)
    fail("cannot write '", target_.string(), "': fsync failed: ", errno_text());
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("cannot write '", target_.string(), "': close failed: ", errno_text());
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    fail("cannot write '", target_.string(), "': rename from '", temp_.string(),
         "' failed: ", errno_text());
  }
  committed_ = true;
  // The rename is durable only once the folder's entry is on disk.
  const std::filesystem::path dir = target_.parent_path();
  sync_directory(dir.empty() ? std::filesystem::path(".") : dir);
}

void sync_directory(const std::filesystem::path& dir) {
  // Some filesystems refuse fsync on a directory; what was renamed is
  // complete already, so that is not an error.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::filesystem::path& path, const std::string& text) {
  AtomicFileWriter out(path);
  out.write(text);
  out.commit();
}

void copy_file_atomic(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::ifstream in(from, std::ios::binary);
  LT_CHECK(in, "cannot read '", from.string(), "': ", errno_text());
  AtomicFileWriter out(to);
  std::vector<char> buffer(size_t{1} << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) out.write(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  LT_CHECK(in.eof(), "cannot read '", from.string(), "': ", errno_text());
  out.commit();
}

void check_can_write(const std::filesystem::path& path, const std::string& setting) {
  namespace fs = std::filesystem;
  LT_CHECK(!path.filename().empty(), setting, " ", path.string(),
           ": not a file name (give the file to write, not a folder)");
  std::error_code ec;
  LT_CHECK(!fs::is_directory(path, ec), setting, " ", path.string(),
           " is a folder; give the file to write");
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  LT_CHECK(fs::exists(folder, ec), setting, " ", path.string(), ": its folder ", folder.string(),
           " does not exist (make it first)");
  LT_CHECK(fs::is_directory(folder, ec), setting, " ", path.string(), ": ", folder.string(),
           " is not a folder");
  try {
    const AtomicFileWriter probe(path);  // its temporary file, removed unwritten
  } catch (const Error& e) {
    fail(setting, " ", path.string(), ": ", e.what());
  }
}

bool is_atomic_temp_name(const std::string& name) {
  const size_t mark = name.rfind(kTempMark);
  // "." and a target name of at least one character before the mark.
  return name.size() > 1 && name[0] == '.' && mark != std::string::npos && mark > 1 &&
         is_numbers(std::string_view(name).substr(mark + std::strlen(kTempMark)), 3);
}

int remove_stale_temp_files(const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> stale;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    // symlink_status: a link of that name is not a writer's file, and what
    // it points to is not this folder's.
    if (std::filesystem::is_regular_file(entry.symlink_status()) &&
        is_atomic_temp_name(entry.path().filename().string()))
      stale.push_back(entry.path());
  }
  int removed = 0;
  for (const auto& path : stale) removed += ::unlink(path.c_str()) == 0 ? 1 : 0;
  return removed;
}

}  // namespace lt::io
