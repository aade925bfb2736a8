#include "core/pinned_pool.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/device.h"
#include "core/error.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/runtime_calls.h"
#endif

namespace lt {

namespace {

// The alignment of the stand-in memory: a cache line and an AVX-512 vector,
// as for the CPU allocator. (Pinned memory comes page-aligned.)
constexpr size_t kHostAlignment = 64;

std::string mib(size_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

PinnedHostPool::PinnedHostPool(PinnedPoolConfig config)
    : PinnedHostPool(cuda_device_visible(), config) {}

PinnedHostPool::PinnedHostPool(bool page_locked, PinnedPoolConfig config)
    : page_locked_(page_locked), config_(config) {
  LT_CHECK(!page_locked_ || cuda_device_visible(),
           "page-locked host memory needs the CUDA backend and a GPU");
  LT_CHECK(std::has_single_bit(config_.min_class_bytes) &&
               std::has_single_bit(config_.max_power_of_two_bytes) &&
               config_.max_power_of_two_bytes >= config_.min_class_bytes &&
               config_.large_class_step_bytes % config_.min_class_bytes == 0 &&
               config_.large_class_step_bytes > 0,
           "inconsistent pinned pool configuration");
}

PinnedHostPool::~PinnedHostPool() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    wait_pending();
  } catch (...) {
    // At exit the CUDA context may be gone; the memory goes with the process.
  }
  release_cached();
  for (auto& [ptr, buffer] : live_) raw_free(ptr);
}

size_t PinnedHostPool::class_size(size_t bytes) const {
  if (bytes <= config_.min_class_bytes) return config_.min_class_bytes;
  if (bytes <= config_.max_power_of_two_bytes) return std::bit_ceil(bytes);
  size_t step = config_.large_class_step_bytes;
  LT_CHECK(bytes <= std::numeric_limits<size_t>::max() - step, "pinned allocation of ", bytes,
           " bytes is too large to represent");
  return (bytes + step - 1) / step * step;
}

void* PinnedHostPool::raw_alloc(size_t size) {
  if (config_.limit_bytes != 0 &&
      static_cast<size_t>(stats_.reserved_bytes) + size > config_.limit_bytes) {
    return nullptr;
  }
#ifdef LT_WITH_CUDA
  if (page_locked_) return cuda::pinned_alloc(size);
#endif
  return std::aligned_alloc(kHostAlignment, size);
}

void PinnedHostPool::raw_free(void* ptr) {
#ifdef LT_WITH_CUDA
  if (page_locked_) {
    cuda::pinned_free(ptr);
    return;
  }
#endif
  std::free(ptr);
}

void* PinnedHostPool::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t size = class_size(bytes);
  process_pending();
  auto cached = [&]() -> void* {
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* ptr = it->second.back();
    it->second.pop_back();
    ++stats_.cache_hits;
    return ptr;
  };
  if (void* ptr = cached()) {
    take(ptr, size, bytes);
    return ptr;
  }
  void* ptr = raw_alloc(size);
  if (ptr == nullptr) {
    // As in the device allocator (Note [Out of memory] in caching_policy.cpp):
    // buffers awaiting events or cached in other classes may make room.
    ++stats_.cache_flushes;
    wait_pending();
    if (void* hit = cached()) {
      take(hit, size, bytes);
      return hit;
    }
    release_cached();
    ptr = raw_alloc(size);
    if (ptr == nullptr) {
      ++stats_.ooms;
      fail(page_locked_ ? "pinned" : "host", " pool out of memory: tried to allocate ", mib(bytes),
           " (", bytes, " bytes, class ", mib(size), "); ",
           mib(static_cast<size_t>(stats_.allocated_bytes)), " allocated in ",
           stats_.live_allocations, " buffers, ", mib(static_cast<size_t>(stats_.reserved_bytes)),
           " held",
           config_.limit_bytes != 0 ? " of a limit of " + mib(config_.limit_bytes)
                                    : std::string(" (no limit: the system refused)"));
    }
  }
  ++stats_.raw_mallocs;
  stats_.reserved_bytes += static_cast<int64_t>(size);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  take(ptr, size, bytes);
  return ptr;
}

void PinnedHostPool::take(void* ptr, size_t size, size_t requested) {
  live_[ptr] = Buffer{size, requested, {}};
  stats_.allocated_bytes += static_cast<int64_t>(size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.requested_bytes += static_cast<int64_t>(requested);
  stats_.peak_requested_bytes = std::max(stats_.peak_requested_bytes, stats_.requested_bytes);
  ++stats_.allocation_count;
  ++stats_.live_allocations;
}

void PinnedHostPool::deallocate(void* ptr, size_t /*bytes*/) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  LT_CHECK(it != live_.end(), "free of ", ptr, ": not a live allocation of the pinned pool");
  Buffer buffer = std::move(it->second);
  live_.erase(it);
  stats_.allocated_bytes -= static_cast<int64_t>(buffer.size);
  stats_.requested_bytes -= static_cast<int64_t>(buffer.requested);
  --stats_.live_allocations;
  if (buffer.uses.empty()) {
    free_[buffer.size].push_back(ptr);
    return;
  }
  // A copy enqueued on one of these streams may still read or write the
  // buffer: it becomes reusable when the work enqueued on each by now is done.
  Pending pending{ptr, buffer.size, {}};
  for (const Stream& stream : buffer.uses) {
    pending.events.emplace_back();
    pending.events.back().record(stream);
  }
  pending_.push_back(std::move(pending));
  ++stats_.blocks_awaiting_events;
}

void PinnedHostPool::record_stream(void* ptr, const Stream& stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  LT_CHECK(it != live_.end(), "record_stream on ", ptr,
           ": not a live allocation of the pinned pool");
  // Work on the CPU stream is done when it is enqueued: nothing to wait for.
  if (stream.device().is_cpu()) return;
  for (const Stream& use : it->second.uses) {
    if (use == stream) return;
  }
  it->second.uses.push_back(stream);
}

void PinnedHostPool::process_pending() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool done = true;
    for (const Event& event : it->events) done = done && event.query();
    if (!done) {
      ++it;
      continue;
    }
    free_[it->size].push_back(it->ptr);
    --stats_.blocks_awaiting_events;
    it = pending_.erase(it);
  }
}

void PinnedHostPool::wait_pending() {
  while (!pending_.empty()) {
    for (const Event& event : pending_.front().events) event.synchronize();
    free_[pending_.front().size].push_back(pending_.front().ptr);
    --stats_.blocks_awaiting_events;
    pending_.pop_front();
  }
}

void PinnedHostPool::release_cached() {
  for (auto& [size, ptrs] : free_) {
    for (void* ptr : ptrs) {
      raw_free(ptr);
      ++stats_.raw_frees;
      stats_.reserved_bytes -= static_cast<int64_t>(size);
    }
  }
  free_.clear();
}

void PinnedHostPool::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  wait_pending();
  release_cached();
}

AllocatorStats PinnedHostPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {stats_.requested_bytes, stats_.peak_requested_bytes, stats_.allocation_count,
          stats_.live_allocations};
}

CachingStats PinnedHostPool::pool_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void PinnedHostPool::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_requested_bytes = stats_.requested_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

PinnedHostPool& pinned_host_pool() {
  static auto* instance = new PinnedHostPool();  // never destroyed: buffers may outlive statics
  return *instance;
}

}  // namespace lt
