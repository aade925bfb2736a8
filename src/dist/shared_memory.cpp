#include "dist/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"

namespace lt::dist {

namespace {

constexpr const char* kShmDir = "/dev/shm";

double gigabytes(size_t bytes) {
  return static_cast<double>(bytes) / 1e9;
}

// Note [Shared memory outlives no run]: the names this process created and
// has not unlinked yet, removed at exit and on SIGINT / SIGTERM. Plain
// char arrays and atomics, so that the signal handler reads them safely.
class PendingNames {
 public:
  static PendingNames& get() {
    static PendingNames* p = new PendingNames();  // never destroyed: atexit uses it
    return *p;
  }
  void add(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Slot& s : slots_) {
      if (s.used.load()) continue;
      std::strncpy(s.name, name.c_str(), sizeof(s.name) - 1);
      s.used.store(true);
      install_handlers();
      return;
    }
  }
  void remove(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Slot& s : slots_)
      if (s.used.load() && name == s.name) s.used.store(false);
  }
  // Async-signal-safe enough: shm_unlink is unlink(2) of a /dev/shm path.
  void unlink_all() {
    for (Slot& s : slots_)
      if (s.used.exchange(false)) ::shm_unlink(s.name);
  }

 private:
  struct Slot {
    std::atomic<bool> used{false};
    char name[64] = {};
  };
  static void on_signal(int signal) {
    get().unlink_all();
    // The action the program had before (the trainer's stop flag, or the
    // default: end the process), for this and later signals.
    struct sigaction& before = get().previous_[signal == SIGINT ? 0 : 1];
    ::sigaction(signal, &before, nullptr);
    ::raise(signal);
  }
  void install_handlers() {
    if (installed_) return;
    installed_ = true;
    std::atexit([] { get().unlink_all(); });
    struct sigaction action = {};
    action.sa_handler = on_signal;
    ::sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previous_[0]);
    ::sigaction(SIGTERM, &action, &previous_[1]);
  }
  std::mutex mutex_;
  std::array<Slot, 8> slots_;
  bool installed_ = false;
  struct sigaction previous_[2] = {};

 public:
  // Once nothing is pending, the program's own handlers come back.
  void restore_handlers_if_idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Slot& s : slots_)
      if (s.used.load()) return;
    if (!installed_) return;
    ::sigaction(SIGINT, &previous_[0], nullptr);
    ::sigaction(SIGTERM, &previous_[1], nullptr);
    installed_ = false;  // the atexit handler stays; it finds nothing pending
  }
};

void* map(int fd, size_t bytes, const std::string& name) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  LT_CHECK(data != MAP_FAILED, "mmap of the shared memory ", kShmDir, name, " (", gigabytes(bytes),
           " GB) failed: ", std::strerror(errno));
  return data;
}

}  // namespace

size_t free_bytes_at(const std::string& dir) {
  struct statvfs s = {};
  LT_CHECK(::statvfs(dir.c_str(), &s) == 0, "statvfs of ", dir, " failed: ", std::strerror(errno));
  return static_cast<size_t>(s.f_bavail) * static_cast<size_t>(s.f_frsize);
}

SharedMemory::SharedMemory(std::string name, void* data, size_t bytes, bool creator)
    : name_(std::move(name)), data_(data), bytes_(bytes), creator_(creator) {}

SharedMemory SharedMemory::create(const std::string& name, size_t bytes) {
  LT_CHECK(bytes > 0, "shared memory ", name, ": 0 bytes");
  LT_CHECK(name.size() < 60 && name[0] == '/', "shared memory: bad name '", name, "'");
  const size_t room = free_bytes_at(kShmDir);
  auto too_small = [&](const std::string& detail) {
    return std::string("the ranks of this host share one copy of the weights in ") + kShmDir +
           ", which needs " + std::to_string(gigabytes(bytes)) + " GB (" + std::to_string(bytes) +
           " bytes) but has " + std::to_string(gigabytes(room)) + " GB free" + detail +
           ": enlarge " + kShmDir +
           " (docker run --shm-size, or mount -o remount,size=... /dev/shm), or set "
           "dist.share_weights false to keep a copy per rank";
  };
  LT_CHECK(bytes <= room, too_small(""));
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  LT_CHECK(fd >= 0, "shm_open of ", kShmDir, name, " failed: ", std::strerror(errno));
  PendingNames::get().add(name);
  // Reserve every page now: tmpfs allocates on first touch, and a page it
  // cannot give then is a SIGBUS in the middle of training.
  const int reserved = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (reserved != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    PendingNames::get().remove(name);
    PendingNames::get().restore_handlers_if_idle();
    fail(too_small(std::string(" (posix_fallocate: ") + std::strerror(reserved) + ")"));
  }
  void* data = nullptr;
  try {
    data = map(fd, bytes, name);
  } catch (...) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    PendingNames::get().remove(name);
    throw;
  }
  ::close(fd);  // the mapping keeps the file open
  return SharedMemory(name, data, bytes, true);
}

SharedMemory SharedMemory::attach(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  LT_CHECK(fd >= 0, "shm_open of ", kShmDir, name,
           " (made by local rank 0) failed: ", std::strerror(errno));
  struct stat st = {};
  const bool sized = ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes;
  if (!sized) {
    ::close(fd);
    fail("shared memory ", kShmDir, name, " is not ", bytes, " bytes (another run's?)");
  }
  void* data = nullptr;
  try {
    data = map(fd, bytes, name);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return SharedMemory(name, data, bytes, false);
}

SharedMemory::SharedMemory(SharedMemory&& other) noexcept
    : before_unmap(std::move(other.before_unmap)),
      name_(std::move(other.name_)),
      data_(other.data_),
      bytes_(other.bytes_),
      creator_(other.creator_) {
  other.data_ = nullptr;
  other.creator_ = false;
  other.before_unmap = nullptr;
}

SharedMemory& SharedMemory::operator=(SharedMemory&& other) noexcept {
  if (this != &other) {
    this->~SharedMemory();
    new (this) SharedMemory(std::move(other));
  }
  return *this;
}

void SharedMemory::unlink() {
  if (!creator_) return;
  ::shm_unlink(name_.c_str());
  PendingNames::get().remove(name_);
  PendingNames::get().restore_handlers_if_idle();
  creator_ = false;
}

SharedMemory::~SharedMemory() {
  if (!data_) return;
  if (before_unmap) before_unmap();
  ::munmap(data_, bytes_);
  unlink();
}

}  // namespace lt::dist
