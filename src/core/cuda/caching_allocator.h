#pragma once
// The CUDA device allocator: the caching policy of core/caching_policy.h
// over cudaMalloc and CUDA events. Each device has one, registered as the
// default allocator for tensors on that device. Allocations are tagged with
// the calling thread's current stream on the device (core/stream.h); a
// buffer that other streams also use must be declared with record_stream
// before it is freed.
//
// Declared without CUDA headers; only CUDA builds define it.
#include <memory>

#include "core/caching_policy.h"
#include "core/stream.h"

namespace lt::cuda {

class CudaCachingAllocator final : public StreamAwareAllocator {
 public:
  explicit CudaCachingAllocator(int device, CachingConfig config = {});
  // Returns every segment to the driver (see CachingPolicy::~CachingPolicy).
  ~CudaCachingAllocator() override;

  // On the current stream of this device.
  void* allocate(size_t bytes) override;
  void* allocate(size_t bytes, const Stream& stream);
  void deallocate(void* ptr, size_t bytes) override;
  void record_stream(void* ptr, const Stream& stream) override;
  Device device() const override { return Device::cuda(device_); }
  // current/peak bytes are the requested bytes (as for every allocator);
  // caching_stats() has the rounded, reserved and call counts.
  AllocatorStats stats() const override;
  void reset_peak() override;

  CachingStats caching_stats() const;
  // Waits for pending events and returns every unused segment to the driver
  // (for another process, or before measuring free memory).
  void empty_cache();
  const CachingPolicy& policy() const { return *policy_; }

 private:
  int device_;
  std::unique_ptr<RawMemory> raw_;  // declared first: outlives the policy that uses it
  std::unique_ptr<CachingPolicy> policy_;
};

// The process-wide allocator of `device` (never destroyed: tensors may
// outlive static destructors). Throws when the device does not exist.
CudaCachingAllocator& caching_allocator(int device);

}  // namespace lt::cuda
