#pragma once
// The CPU standing in for a GPU (docs/design.md, "The CPU stands in for the
// GPU in tests"): "device" memory is host memory behind a capacity-limited
// allocator, and the two copy streams are worker threads doing memcpy. The
// streaming executor runs on it unchanged, so CI tests every scheduling path.
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include "exec/streaming_device.h"

namespace lt::exec {

// Host memory with a hard capacity, counted like device memory: a request
// that would exceed it is an lt::Error naming the capacity, the request and
// what is in use. Capacity 0 means unlimited.
class CapacityAllocator final : public Allocator {
 public:
  explicit CapacityAllocator(int64_t capacity_bytes);
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return Device::cpu(); }
  AllocatorStats stats() const override { return counters_.snapshot(); }
  void reset_peak() override { counters_.reset_peak(); }
  int64_t capacity() const { return capacity_; }

 private:
  int64_t capacity_;
  std::mutex mutex_;  // makes check-then-count atomic
  AllocationCounters counters_;
};

struct StandInOptions {
  int64_t capacity_bytes = 0;  // 0 = unlimited
  // Test hook: each copy first sleeps a random time up to this many
  // microseconds, to shake out missing waits (results must not change).
  int64_t max_copy_delay_us = 0;
  uint64_t delay_seed = 1;
  // Test hook: uploads run at once, on the caller's thread, and a download
  // only when its ticket, or a later download's, is waited for (in queue
  // order, as a copy engine would). The device then holds every buffer a
  // copy needs for as long as the executor lets it: what exec::held_bytes
  // counts, at any point, without timing.
  bool copies_when_waited = false;
  // Test hook: host_memory() (the gradient slabs, and the upload copies of
  // the stages on disk) is memory of its own, outside cpu_allocator()'s
  // statistics, as a GPU's pinned pool is; so a test can count what the
  // masters and states hold in host memory as on a GPU.
  bool separate_host_memory = false;
};

class StandInDevice final : public StreamingDevice {
 public:
  explicit StandInDevice(const StandInOptions& options = {});
  std::string memory_space() const override { return "device"; }
  Allocator& memory() override { return memory_; }
  DType compute_dtype() const override { return DType::F32; }
  Ticket upload(CopyList copies, Ticket after, std::string label) override;
  Ticket download(CopyList copies, std::function<void()> then, std::string label) override;
  std::unique_ptr<Scope> compute_scope() override;
  Allocator& host_memory() override {
    if (separate_host_memory_) return host_memory_;
    return cpu_allocator();
  }

 private:
  // StandInOptions::copies_when_waited: runs the pending downloads up to
  // and including number `last`.
  void land_downloads_through(uint64_t last);

  CapacityAllocator memory_;
  CapacityAllocator host_memory_{0};  // StandInOptions::separate_host_memory
  const bool separate_host_memory_;
  const bool copies_when_waited_;
  std::mutex pending_mutex_;
  std::deque<std::function<void()>> pending_downloads_;  // when copies_when_waited
  uint64_t downloads_issued_ = 0, downloads_landed_ = 0;
  // Declared after memory_: destroyed first, so queued copies finish while
  // the memory they touch still exists.
  WorkQueue h2d_{"h2d"};
  WorkQueue d2h_{"d2h"};
};

}  // namespace lt::exec
