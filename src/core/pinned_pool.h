#pragma once
// A pool of page-locked host buffers for the copies executors make between
// host and GPU (weights in, gradients out, offloaded activations). Pinning
// is slow (cudaHostAlloc maps and locks every page: milliseconds for a
// large buffer) and copies from pageable memory run at a seventh of the
// pinned rate on the H200 machine (docs/gpu-machine.md), so buffers are kept and
// reused rather than pinned per copy.
//
// Buffers come in size classes, and a freed buffer serves the next request
// of its class. A buffer that a stream may still be copying from or into
// when it is freed (record_stream) is not reused until an event recorded on
// that stream at free time has completed.
//
// In a build without CUDA, or on a machine without a GPU, the pool hands
// out ordinary 64-byte-aligned host memory with the same policy, so
// executors tested on the CPU use the same type.
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/caching_policy.h"
#include "core/stream.h"

namespace lt {

struct PinnedPoolConfig {
  // Size classes: powers of two from min_class_bytes (one page: nothing
  // smaller can be pinned) up to max_power_of_two_bytes, then multiples of
  // large_class_step_bytes. Powers of two let one buffer serve every
  // request up to twice smaller; above 64 MiB the up-to-2x waste would cost
  // gigabytes of locked memory for the executors' weight and gradient slabs
  // (which repeat the same sizes every step), so the step is a fixed 16 MiB:
  // at most 25% waste, reached only just above 64 MiB.
  size_t min_class_bytes = size_t{4} << 10;          // 4 KiB
  size_t max_power_of_two_bytes = size_t{64} << 20;  // 64 MiB
  size_t large_class_step_bytes = size_t{16} << 20;  // 16 MiB
  // At most this many bytes are held (allocated or cached); 0 means no
  // limit. Locking most of host memory starves the OS and the optimizer,
  // so an executor may cap it. Reaching it empties the cache and retries
  // before failing, as running out of memory does.
  size_t limit_bytes = 0;
};

class PinnedHostPool final : public StreamAwareAllocator {
 public:
  // Page-locked memory when built with CUDA and a GPU is present, else
  // ordinary host memory.
  explicit PinnedHostPool(PinnedPoolConfig config = {});
  // `page_locked` false forces ordinary host memory (tests, CPU runs).
  PinnedHostPool(bool page_locked, PinnedPoolConfig config);
  // Returns every buffer, in use or not: destroy the pool only when no
  // copy uses its memory any more.
  ~PinnedHostPool() override;

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void record_stream(void* ptr, const Stream& stream) override;
  // Pinned host memory is host memory: tensors on it are CPU tensors.
  Device device() const override { return Device::cpu(); }
  AllocatorStats stats() const override;
  void reset_peak() override;

  // Allocated and reserved count class sizes; raw_mallocs counts pinning
  // calls and raw_frees buffers returned to the system.
  CachingStats pool_stats() const;
  // Waits for pending events and returns every cached buffer.
  void empty_cache();
  bool page_locked() const { return page_locked_; }
  size_t class_size(size_t bytes) const;

 private:
  struct Buffer {
    size_t size = 0;  // the class size
    size_t requested = 0;
    std::vector<Stream> uses;  // streams that may still copy from or into it
  };
  struct Pending {
    void* ptr;
    size_t size;
    std::vector<Event> events;
  };

  void* raw_alloc(size_t size);
  void raw_free(void* ptr);
  void process_pending();
  void wait_pending();
  void release_cached();
  void take(void* ptr, size_t size, size_t requested);

  const bool page_locked_;
  const PinnedPoolConfig config_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<void*>> free_;  // by class size
  std::unordered_map<void*, Buffer> live_;
  // Freed while in use on other streams, oldest first. Unlike the device
  // allocator, these events span streams (and devices), so every pending
  // buffer is polled; there are few (one per in-flight copy buffer).
  std::deque<Pending> pending_;
  CachingStats stats_;
};

// The process-wide pool.
PinnedHostPool& pinned_host_pool();

}  // namespace lt
