#pragma once
// One block of host memory that several processes of this host map
// (POSIX shared memory: shm_open + mmap, a file of /dev/shm). The ranks of
// a host keep one copy of the weights there (exec/shared_weights.h).
//
// Note [Shared memory outlives no run]
// A segment is a file in /dev/shm, which nothing removes when its
// processes die: a run that crashed would leave it holding host memory
// until the next reboot. So the creator unlinks the name as soon as every
// process has mapped it (dist/host_segment.h: under MPI in
// open_host_segment; under torchrun after the segment's first barrier,
// train/host_weights.cpp): from then on the memory is the kernel's to
// free when the last mapping goes, however the processes end (exit,
// SIGKILL, a crash). Before that moment (the start-up) an exit, or SIGINT
// / SIGTERM, unlinks it too (an atexit handler; the signal handler
// re-raises the signal); only a SIGKILL in that window leaves the file
// behind, named lazytrain-<pid>-<n> after the creating process (MPI) or
// lazytrain-<run>-<host> (torchrun).
#include <cstddef>
#include <functional>
#include <string>

namespace lt::dist {

class SharedMemory {
 public:
  // Creates `name` (e.g. "/lazytrain-123-0") of `bytes` bytes, zeroed, and
  // maps it. Throws lt::Error naming /dev/shm and the sizes when it has
  // too little room (a container's default /dev/shm is 64 MB), or naming
  // the call that failed.
  static SharedMemory create(const std::string& name, size_t bytes);
  // Maps the segment another process created.
  static SharedMemory attach(const std::string& name, size_t bytes);
  SharedMemory(SharedMemory&& other) noexcept;
  SharedMemory& operator=(SharedMemory&& other) noexcept;
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  // Unmaps (after `before_unmap`, if set: a CUDA registration is undone);
  // the creator also unlinks the name if it still exists.
  ~SharedMemory();

  // Removes the name (Note [Shared memory outlives no run]); the memory
  // lives on while mapped. Only the creator unlinks.
  void unlink();
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }
  // Called once, before the memory is unmapped.
  std::function<void()> before_unmap;

 private:
  SharedMemory(std::string name, void* data, size_t bytes, bool creator);
  std::string name_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool creator_ = false;
};

// The free bytes of the filesystem at `dir` (statvfs: what an unprivileged
// process may still write).
size_t free_bytes_at(const std::string& dir);

}  // namespace lt::dist
