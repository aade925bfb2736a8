#pragma once
// DiskOffloadFile: a scratch file that boundary activations are written to
// in forward and read back from in backward (the planner's "disk"
// placement).
//
// I/O is O_DIRECT through 4 KiB-aligned bounce buffers, with several
// requests in flight: io_uring when the kernel allows it, otherwise (or when
// forced, for tests) worker threads doing pread/pwrite. Regions are
// allocated append-only and padded to 4 KiB, so any byte count round-trips.
// On a filesystem without O_DIRECT (tmpfs) the file is opened buffered.
// One DiskOffloadFile is used by one thread at a time.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lt::io {

struct DiskRegion {
  int64_t offset = 0;  // multiple of kDiskAlignment
  int64_t bytes = 0;   // what the caller stores (the file keeps it padded)
};

inline constexpr int64_t kDiskAlignment = 4096;

// Removes the files in `directory` whose names start with `prefix` and that
// no live DiskOffloadFile holds (each holds an flock on its file): what a
// killed process left. Returns how many were removed.
int remove_unlocked_files(const std::filesystem::path& directory, const std::string& prefix);

class DiskOffloadFile {
 public:
  enum class Backend { IoUring, Threads };
  struct Options {
    bool force_threads = false;     // skip io_uring even where it works
    int queue_depth = 8;            // requests in flight (and bounce buffers)
    int64_t chunk_bytes = 1 << 20;  // bytes per request; a multiple of 4 KiB
  };

  // Creates (or truncates) `path`; the file is removed on destruction.
  explicit DiskOffloadFile(std::string path, Options options);
  DiskOffloadFile(std::string path) : DiskOffloadFile(std::move(path), Options{}) {}
  ~DiskOffloadFile();
  DiskOffloadFile(const DiskOffloadFile&) = delete;
  DiskOffloadFile& operator=(const DiskOffloadFile&) = delete;

  DiskRegion allocate(int64_t bytes);
  void write(const DiskRegion& region, const void* src);
  void read(const DiskRegion& region, void* dst);

  Backend backend() const { return backend_; }
  bool direct() const { return direct_; }  // O_DIRECT in effect
  const std::string& path() const { return path_; }
  int64_t size_bytes() const { return end_; }  // bytes allocated so far

 private:
  void io_threads(const DiskRegion& region, void* buffer, bool writing);
  void io_uring_transfer(const DiskRegion& region, void* buffer, bool writing);

  std::string path_;
  Options options_;
  int fd_ = -1;
  bool direct_ = false;
  Backend backend_ = Backend::Threads;
  int64_t end_ = 0;
  std::vector<void*> bounce_;  // queue_depth aligned buffers of chunk_bytes
  void* ring_ = nullptr;       // struct io_uring*, when backend_ is IoUring
};

const char* backend_name(DiskOffloadFile::Backend backend);  // "io_uring", "threads"

}  // namespace lt::io
