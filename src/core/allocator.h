#pragma once
// The allocator interface every memory space plugs into: the host heap now,
// later the pinned host pool and the CUDA caching allocator. Statistics are
// a separate value type so that policies and reporting stay apart.
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace lt {

struct AllocatorStats {
  int64_t current_bytes = 0;     // bytes handed out and not yet returned
  int64_t peak_bytes = 0;        // high-water mark of current_bytes
  int64_t allocation_count = 0;  // number of successful allocate() calls, ever
  int64_t live_allocations = 0;  // allocations not yet returned
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory for `bytes` bytes (never null; throws lt::Error on failure).
  // A zero-byte request returns a valid, unique pointer.
  virtual void* allocate(size_t bytes) = 0;
  // `bytes` must be the size passed to allocate().
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual Device device() const = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
};

// Thread-safe counters shared by the allocators that track plain sizes.
class AllocationCounters {
 public:
  void on_allocate(size_t bytes);
  void on_deallocate(size_t bytes);
  AllocatorStats snapshot() const;
  void reset_peak();

 private:
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> count_{0};
  std::atomic<int64_t> live_{0};
};

// Host heap with 64-byte alignment (a cache line, and the width of an
// AVX-512 vector), so SIMD kernels may use aligned loads on fresh buffers.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  // Blocks of this many bytes or more get a mapping of their own (glibc's
  // largest mmap threshold), which their free returns to the system; the
  // heap serves smaller ones (Note [Huge pages for large host tensors]).
  static constexpr size_t kOwnMappingFrom = size_t{32} << 20;
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return Device::cpu(); }
  AllocatorStats stats() const override { return counters_.snapshot(); }
  void reset_peak() override { counters_.reset_peak(); }

 private:
  AllocationCounters counters_;
};

// The process-wide host allocator that tensors on the CPU use by default.
CpuAllocator& cpu_allocator();

// The allocator tensors on `device` use by default. For CUDA devices this
// throws unless the CUDA backend was built and a device is present. For the
// CPU it is cpu_allocator(), unless a CpuAllocatorOverride is active on the
// calling thread.
Allocator& default_allocator(Device device);

// For its scope, CPU tensors that the calling thread creates without naming
// an allocator come from `allocator`. The streaming executor's CPU stand-in
// uses it so that a stage's activations and gradients count against the
// capacity-limited "device" memory it simulates. Scopes nest.
class CpuAllocatorOverride {
 public:
  explicit CpuAllocatorOverride(Allocator& allocator);
  ~CpuAllocatorOverride();
  CpuAllocatorOverride(const CpuAllocatorOverride&) = delete;
  CpuAllocatorOverride& operator=(const CpuAllocatorOverride&) = delete;

 private:
  Allocator* previous_;
};

// Lets a backend (CUDA) register its allocator without core/ depending on it.
void register_device_allocator(DeviceKind kind, Allocator* (*factory)(int index));

}  // namespace lt
