#pragma once
// The CPU standing in for a GPU (docs/design.md, "The CPU stands in for the
// GPU in tests"): "device" memory is host memory behind a capacity-limited
// allocator, and the two copy streams are worker threads doing memcpy. The
// streaming executor runs on it unchanged, so CI tests every scheduling path.
#include <cstdint>
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

 private:
  CapacityAllocator memory_;
  // Declared after memory_: destroyed first, so queued copies finish while
  // the memory they touch still exists.
  WorkQueue h2d_{"h2d"};
  WorkQueue d2h_{"d2h"};
};

}  // namespace lt::exec
