#include "train/out_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/error.h"

namespace lt::train {

namespace fs = std::filesystem;

OutDirLock::OutDirLock(const fs::path& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  LT_CHECK(!ec, "out.dir: cannot create '", out_dir.string(), "': ", ec.message());
  const fs::path path = out_dir / ".lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  LT_CHECK(fd_ >= 0, "out.dir: cannot open the lock file '", path.string(),
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
    fail("out.dir: cannot lock '", path.string(), "': ", std::strerror(err));
  }
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
    // The lock holds without the PID; only the second run's message loses it.
  }
}

OutDirLock::~OutDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace lt::train
