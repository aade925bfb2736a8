#include "train/out_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

// The folders create_directories(dir) would make, deepest first (as far
// as the file system can tell: a name it refuses ends the list, and
// creating the folder then fails naming it).
std::vector<fs::path> missing_folders(const fs::path& dir) {
  std::vector<fs::path> missing;
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  while (!ec && !p.empty() && !fs::exists(p, ec) && !ec) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  if (ec) missing.clear();
  return missing;
}

// Whether `fd` is still the file at `path` (a run that failed may have
// removed the file between our open and our flock).
bool is_file_at(int fd, const fs::path& path) {
  struct stat held {
  }, named{};
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

}  // namespace

OutDirLock::OutDirLock(const fs::path& out_dir) : path_(out_dir / ".lock") {
  // A few rounds: each one that fails lost a race with a run that removed
  // the file (or its folder) as it failed.
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::vector<fs::path> missing = missing_folders(out_dir);
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    LT_CHECK(!ec, "out.dir: cannot create '", out_dir.string(), "': ", ec.message());
    if (made_dirs_.empty()) made_dirs_ = std::move(missing);
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    const bool made = fd_ >= 0;
    if (!made && errno == EEXIST) fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    if (fd_ < 0 && errno == ENOENT) continue;
    LT_CHECK(fd_ >= 0, "out.dir: cannot open the lock file '", path_.string(),
             "': ", std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char pid[32] = {};
      const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
      ::close(fd_);
      fd_ = -1;
      const std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "";
      LT_CHECK(err != EWOULDBLOCK, "out.dir '", out_dir.string(),
               "' is in use by another lazytrain run (pid ",
               holder.empty() ? "unknown" : holder.substr(0, holder.find('\n')),
               "); wait for it to end, or set another out.dir");
      fail("out.dir: cannot lock '", path_.string(), "': ", std::strerror(err));
    }
    if (!is_file_at(fd_, path_)) {
      ::close(fd_);
      fd_ = -1;
      continue;
    }
    made_file_ = made;
    const std::string me = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
      // The lock holds without the PID; only the second run's message loses it.
    }
    return;
  }
  fail("out.dir: cannot lock '", path_.string(), "': other runs kept removing it; try again");
}

OutDirLock::~OutDirLock() {
  if (fd_ < 0) return;
  // Removed while still locked: a run waiting on this file sees it is gone.
  if (!committed_ && made_file_) ::unlink(path_.c_str());
  ::close(fd_);  // releases the flock
  if (committed_) return;
  for (const fs::path& dir : made_dirs_) {
    std::error_code ec;
    if (!fs::remove(dir, ec)) break;  // not empty (another run's, or files left): kept
  }
}

}  // namespace lt::train
