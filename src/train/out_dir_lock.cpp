#include "train/out_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
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

// Why out_dir cannot be made a folder, as the user would say it ("" when
// it is one, or may be one: then create_directories says what fails). The
// path itself, or else the nearest one above it that names something, is
// looked at: a file there, or a link to nothing (create_directories says
// only "File exists" or "Not a directory").
std::string not_a_folder(const fs::path& out_dir) {
  std::error_code ec;
  fs::path p = out_dir;
  fs::file_status own = fs::symlink_status(p, ec);
  while (!fs::exists(own)) {
    if (!p.has_parent_path() || p.parent_path() == p) return "";
    p = p.parent_path();
    own = fs::symlink_status(p, ec);
  }
  const fs::file_status target = fs::status(p, ec);
  if (fs::is_directory(target)) return "";
  std::string what = "out.dir '" + out_dir.string() + "'";
  if (p != out_dir) what += " cannot be made: '" + p.string() + "'";
  if (fs::is_symlink(own)) {
    const std::string to = fs::read_symlink(p, ec).string();
    if (!fs::exists(target))
      return what + " is a symbolic link to '" + to +
             "', which does not exist; make that folder, or set another out.dir";
    return what + " is a symbolic link to '" + to +
           "', which is a file, not a folder; set another out.dir";
  }
  return what + (fs::is_regular_file(target) ? " is a file, not a folder" : " is not a folder") +
         "; set another out.dir";
}

// Whether `fd` is still the file at `path` (a run that failed may have
// removed the file between our open and our flock).
bool is_file_at(int fd, const fs::path& path) {
  struct stat held {
  }, named{};
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

// Note [An interrupted setup]: from the lock's taking until the run
// commits (model loading, tokenizing, planning: minutes on a large model),
// SIGINT, SIGTERM and SIGHUP would keep their default action and end the
// process at once (the trainer's stop flag, which finishes a step and
// saves, comes with the scoring before training, else the first step). The kernel drops the flock
// then but not the file, so out.dir kept a stray .lock, or was a new folder holding only it. While
// a lock is uncommitted, a handler stands in for that default action: it removes what the lock's
// destructor would, says so on stderr, and ends the process by the same signal. A disposition the
// program set itself (ignored, or a handler of its own) is left alone. The handler makes only
// async-signal-safe calls (unlink, rmdir, write, sigaction, raise) on paths made before it could
// run.
constexpr std::array<int, 3> kStopSignals = {SIGINT, SIGTERM, SIGHUP};  // SIGHUP: a closed terminal
// The uncommitted locks of this process: one per run; tests hold several.
// A lock finding no free slot is not cleaned on a signal.
std::array<std::atomic<const OutDirLock*>, 8> uncommitted{};
std::mutex uncommitted_mutex;  // arm and disarm; the handler reads the slots only

// Sets `signal`'s handler to `to` where it is `from` (a disposition set
// since, or an SA_SIGINFO one, is left alone).
void replace_disposition(int signal, void (*from)(int), void (*to)(int)) {
  struct sigaction current {};
  if (::sigaction(signal, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != from) return;
  struct sigaction action {};
  action.sa_handler = to;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(signal, &action, nullptr);
}

// Whether the lock found a slot (one that did not is cleaned by its
// destructor only).
bool arm(const OutDirLock* lock, void (*handler)(int)) {
  std::lock_guard<std::mutex> guard(uncommitted_mutex);
  bool placed = false;
  for (auto& slot : uncommitted) {
    const OutDirLock* empty = nullptr;
    if (slot.compare_exchange_strong(empty, lock)) {
      placed = true;
      break;
    }
  }
  for (int signal : kStopSignals) replace_disposition(signal, SIG_DFL, handler);
  return placed;
}

// The default action comes back once no lock is uncommitted, unless a
// handler installed since stands over ours (it restores ours, which then
// finds nothing to remove and ends the process as the default would).
// Whether `lock` was still in its slot: not when a signal's cleanup
// (remove_uncommitted) took it out, having removed what it made.
// The default action back once no lock is uncommitted; the caller holds
// uncommitted_mutex.
void release_if_none_left(void (*handler)(int)) {
  for (const auto& slot : uncommitted)
    if (slot.load() != nullptr) return;
  for (int signal : kStopSignals) replace_disposition(signal, handler, SIG_DFL);
}

bool disarm(const OutDirLock* lock, void (*handler)(int)) {
  std::lock_guard<std::mutex> guard(uncommitted_mutex);
  bool found = false;
  for (auto& slot : uncommitted) {
    const OutDirLock* mine = lock;
    found = slot.compare_exchange_strong(mine, nullptr) || found;
  }
  release_if_none_left(handler);
  return found;
}

void say(const char* text) {
  const ssize_t written = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)written;  // nothing to do about a stderr that cannot be written
}

}  // namespace

void OutDirLock::remove_uncommitted() noexcept {
  for (auto& slot : uncommitted)
    if (const OutDirLock* lock = slot.exchange(nullptr)) lock->remove_what_it_made();
}

void OutDirLock::release_signals() {
  std::lock_guard<std::mutex> guard(uncommitted_mutex);
  release_if_none_left(on_signal_in_setup);
}

void OutDirLock::on_signal_in_setup(int signal) {
  for (auto& slot : uncommitted) {
    const OutDirLock* lock = slot.exchange(nullptr);
    if (lock == nullptr) continue;
    lock->remove_what_it_made();
    say(signal == SIGINT ? "\nSIGINT" : signal == SIGHUP ? "\nSIGHUP" : "\nSIGTERM");
    say(" while the run was setting up: stopped; out.dir '");
    say(lock->out_dir_.c_str());
    say("' is left as it was before the run\n");
  }
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(signal, &action, nullptr);
  ::raise(signal);  // delivered as this handler returns: the default action ends the process
}

OutDirLock::OutDirLock(const fs::path& out_dir) : out_dir_(out_dir), path_(out_dir / ".lock") {
  if (const std::string why = not_a_folder(out_dir); !why.empty()) fail(why);
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
    // A lock file an earlier run left opens in a folder the run can no
    // longer write (made read-only since): a resume trained its steps,
    // then failed at the first file it wrote.
    if (!made) {
      const std::string why = cannot_create_files_in(out_dir);
      if (!why.empty()) {
        ::close(fd_);
        fd_ = -1;
        fail("out.dir '", out_dir.string(), "': cannot create files there (", why,
             "); the run writes its config, metrics and checkpoints into it: make it writable, "
             "or set another out.dir");
      }
    }
    made_file_ = made;
    struct stat folder {};
    if (::stat(out_dir.c_str(), &folder) == 0) {
      folder_device_ = folder.st_dev;
      folder_inode_ = folder.st_ino;
    }
    in_slot_ = arm(this, on_signal_in_setup);  // before the PID: cleaned on a signal
    const std::string me = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) < 0) {
      // The lock holds without the PID; only the second run's message loses it.
    }
    return;
  }
  fail("out.dir: cannot lock '", path_.string(), "': other runs kept removing it; try again");
}

std::string cannot_create_files_in(const fs::path& dir) {
  const fs::path probe = dir / (".lazytrain-probe-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno == EEXIST ? "" : std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

void OutDirLock::remove_what_it_made() const noexcept {
  if (made_file_) ::unlink(path_.c_str());
  for (const fs::path& dir : made_dirs_) {
    if (::rmdir(dir.c_str()) != 0) break;  // not empty (another run's, or files left): kept
  }
}

std::string OutDirLock::lost() const {
  if (fd_ < 0) return "";
  struct stat named {};
  if (::stat(path_.c_str(), &named) != 0)
    return errno == ENOENT || errno == ENOTDIR ? "its lock file " + path_.string() + " is gone"
                                               : "";
  if (!is_file_at(fd_, path_)) return path_.string() + " is another lock file now";
  return "";
}

bool OutDirLock::folder_kept() const {
  struct stat folder {};
  return folder_inode_ != 0 && ::stat(out_dir_.c_str(), &folder) == 0 &&
         folder.st_dev == folder_device_ && folder.st_ino == folder_inode_;
}

void OutDirLock::commit() {
  if (!committed_) disarm(this, on_signal_in_setup);
  committed_ = true;
}

OutDirLock::~OutDirLock() {
  if (fd_ < 0) return;
  if (!committed_) {
    // Removed while still locked: a run waiting on this file sees it is
    // gone. Not again after remove_uncommitted: another run may hold a
    // .lock there by now.
    if (disarm(this, on_signal_in_setup) || !in_slot_) remove_what_it_made();
  }
  ::close(fd_);  // releases the flock
}

}  // namespace lt::train
