#include "io/disk_offload.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"

#ifdef LT_HAVE_LIBURING
#include <liburing.h>
#endif

namespace lt::io {

namespace {

int64_t round_up(int64_t n) {
  return (n + kDiskAlignment - 1) / kDiskAlignment * kDiskAlignment;
}

// pread/pwrite the whole of [offset, offset + bytes), resuming after short
// transfers.
void transfer_all(int fd, char* buffer, int64_t bytes, int64_t offset, bool writing,
                  const std::string& path) {
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t n = writing ? ::pwrite(fd, buffer + done, bytes - done, offset + done)
                              : ::pread(fd, buffer + done, bytes - done, offset + done);
    if (n < 0 && errno == EINTR) continue;
    LT_CHECK(n > 0, path, ": ", writing ? "write" : "read", " of ", bytes, " bytes at offset ",
             offset, " failed: ", n < 0 ? std::strerror(errno) : "end of file");
    done += n;
  }
}

// Copies a chunk of the caller's bytes into an aligned buffer, zero-padding
// the tail to the alignment; returns the padded length.
int64_t stage_chunk(void* bounce, const char* src, int64_t bytes) {
  std::memcpy(bounce, src, bytes);
  const int64_t padded = round_up(bytes);
  std::memset(static_cast<char*>(bounce) + bytes, 0, padded - bytes);
  return padded;
}

}  // namespace

int remove_unlocked_files(const std::filesystem::path& directory, const std::string& prefix) {
  std::error_code ec;
  if (!std::filesystem::is_directory(directory, ec)) return 0;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !entry.is_regular_file()) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {  // no live owner
      std::error_code rm;
      removed += std::filesystem::remove(entry.path(), rm) ? 1 : 0;
    }
    ::close(fd);
  }
  return removed;
}

const char* backend_name(DiskOffloadFile::Backend backend) {
  return backend == DiskOffloadFile::Backend::IoUring ? "io_uring" : "threads";
}

DiskOffloadFile::DiskOffloadFile(std::string path, Options options)
    : path_(std::move(path)), options_(options) {
  LT_CHECK(options_.queue_depth >= 1 && options_.chunk_bytes >= kDiskAlignment &&
               options_.chunk_bytes % kDiskAlignment == 0,
           "disk offload: queue_depth must be >= 1 and chunk_bytes a multiple of 4096");
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  direct_ = fd_ >= 0;
  if (fd_ < 0 && errno == EINVAL)  // no O_DIRECT on this filesystem (tmpfs)
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  LT_CHECK(fd_ >= 0, path_, ": cannot create the disk offload file: ", std::strerror(errno));
  // Held while the file is in use: a later run that can take the lock knows
  // the file's owner is gone (killed) and removes it (remove_unlocked_files).
  ::flock(fd_, LOCK_EX | LOCK_NB);
  for (int i = 0; i < options_.queue_depth; ++i) {
    void* p = std::aligned_alloc(kDiskAlignment, options_.chunk_bytes);
    LT_CHECK(p != nullptr, "disk offload: cannot allocate bounce buffers");
    bounce_.push_back(p);
  }
#ifdef LT_HAVE_LIBURING
  if (!options_.force_threads) {
    auto* ring = new io_uring;
    // Fails with -ENOSYS or -EPERM where the kernel or a seccomp filter
    // forbids io_uring (many containers): the threads take over.
    if (io_uring_queue_init(options_.queue_depth, ring, 0) == 0) {
      ring_ = ring;
      backend_ = Backend::IoUring;
    } else {
      delete ring;
    }
  }
#endif
}

DiskOffloadFile::~DiskOffloadFile() {
#ifdef LT_HAVE_LIBURING
  if (ring_) {
    io_uring_queue_exit(static_cast<io_uring*>(ring_));
    delete static_cast<io_uring*>(ring_);
  }
#endif
  for (void* p : bounce_) std::free(p);
  if (fd_ >= 0) ::close(fd_);
  ::unlink(path_.c_str());
}

DiskRegion DiskOffloadFile::allocate(int64_t bytes) {
  LT_CHECK(bytes >= 0, "disk offload: cannot allocate ", bytes, " bytes");
  DiskRegion r{end_, bytes};
  end_ += round_up(bytes);
  return r;
}

void DiskOffloadFile::write(const DiskRegion& region, const void* src) {
  LT_CHECK(region.offset % kDiskAlignment == 0 && region.offset + round_up(region.bytes) <= end_,
           path_, ": write to a region this file did not allocate");
  if (backend_ == Backend::IoUring)
    io_uring_transfer(region, const_cast<void*>(src), true);
  else
    io_threads(region, const_cast<void*>(src), true);
}

void DiskOffloadFile::read(const DiskRegion& region, void* dst) {
  LT_CHECK(region.offset % kDiskAlignment == 0 && region.offset + round_up(region.bytes) <= end_,
           path_, ": read of a region this file did not allocate");
  if (backend_ == Backend::IoUring)
    io_uring_transfer(region, dst, false);
  else
    io_threads(region, dst, false);
}

void DiskOffloadFile::io_threads(const DiskRegion& region, void* buffer, bool writing) {
  const int64_t chunk = options_.chunk_bytes;
  const int64_t chunks = (region.bytes + chunk - 1) / chunk;
  const int workers = static_cast<int>(std::min<int64_t>(options_.queue_depth, chunks));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(workers);
  char* user = static_cast<char*>(buffer);
  for (int t = 0; t < workers; ++t) {
    threads.emplace_back([&, t] {
      try {
        // Worker t moves chunks t, t + workers, ... through its own buffer.
        for (int64_t k = t; k < chunks; k += workers) {
          const int64_t begin = k * chunk;
          const int64_t n = std::min(chunk, region.bytes - begin);
          char* bounce = static_cast<char*>(bounce_[t]);
          if (writing) {
            const int64_t padded = stage_chunk(bounce, user + begin, n);
            transfer_all(fd_, bounce, padded, region.offset + begin, true, path_);
          } else {
            transfer_all(fd_, bounce, round_up(n), region.offset + begin, false, path_);
            std::memcpy(user + begin, bounce, n);
          }
        }
      } catch (const Error& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) LT_CHECK(e.empty(), e);
}

void DiskOffloadFile::io_uring_transfer(const DiskRegion& region, void* buffer, bool writing) {
#ifndef LT_HAVE_LIBURING
  (void)region;
  (void)buffer;
  (void)writing;
  fail("disk offload: built without liburing");
#else
  auto* ring = static_cast<io_uring*>(ring_);
  const int64_t chunk = options_.chunk_bytes;
  const int64_t chunks = (region.bytes + chunk - 1) / chunk;
  char* user = static_cast<char*>(buffer);
  // Per bounce buffer: the chunk it carries (-1: free) and its padded length.
  std::vector<int64_t> carrying(bounce_.size(), -1), length(bounce_.size(), 0);
  int64_t next = 0, in_flight = 0;
  while (next < chunks || in_flight > 0) {
    // Fill every free buffer with a request.
    bool submitted = false;
    for (size_t b = 0; b < bounce_.size() && next < chunks; ++b) {
      if (carrying[b] >= 0) continue;
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (!sqe) break;
      const int64_t begin = next * chunk;
      const int64_t n = std::min(chunk, region.bytes - begin);
      length[b] = writing ? stage_chunk(bounce_[b], user + begin, n) : round_up(n);
      if (writing)
        io_uring_prep_write(sqe, fd_, bounce_[b], length[b], region.offset + begin);
      else
        io_uring_prep_read(sqe, fd_, bounce_[b], length[b], region.offset + begin);
      io_uring_sqe_set_data64(sqe, b);
      carrying[b] = next++;
      ++in_flight;
      submitted = true;
    }
    if (submitted) {
      const int rc = io_uring_submit(ring);
      LT_CHECK(rc >= 0, path_, ": io_uring submit failed: ", std::strerror(-rc));
    }
    // Retire one completion (waiting for it), then any others ready.
    io_uring_cqe* cqe = nullptr;
    int rc = io_uring_wait_cqe(ring, &cqe);
    while (rc == -EINTR) rc = io_uring_wait_cqe(ring, &cqe);
    LT_CHECK(rc == 0, path_, ": io_uring wait failed: ", std::strerror(-rc));
    do {
      const auto b = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(ring, cqe);
      LT_CHECK(res >= 0, path_, ": ", writing ? "write" : "read", " at offset ",
               region.offset + carrying[b] * chunk, " failed: ", std::strerror(-res));
      const int64_t begin = carrying[b] * chunk;
      char* bounce = static_cast<char*>(bounce_[b]);
      // A short transfer (rare on regular files) is finished synchronously.
      if (res < length[b])
        transfer_all(fd_, bounce + res, length[b] - res, region.offset + begin + res, writing,
                     path_);
      if (!writing) std::memcpy(user + begin, bounce, std::min(chunk, region.bytes - begin));
      carrying[b] = -1;
      --in_flight;
    } while (io_uring_peek_cqe(ring, &cqe) == 0);
  }
#endif
}

}  // namespace lt::io
