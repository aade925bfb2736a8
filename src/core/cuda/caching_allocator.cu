// The CUDA backend of the caching policy: raw memory from cudaMalloc and
// events that tell when other streams are done with a freed block.
#include "core/cuda/caching_allocator.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "core/cuda/device_info.h"

namespace lt::cuda {

namespace {

// Called only by its policy, under the policy's mutex.
class CudaRawMemory final : public RawMemory {
 public:
  explicit CudaRawMemory(int device) : device_(device) {}
  ~CudaRawMemory() override {
    for (cudaEvent_t event : idle_events_) cudaEventDestroy(event);  // no check: may be at exit
    cudaGetLastError();
  }

  void* malloc(size_t bytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // the policy handles it: empty the cache, retry, report
      return nullptr;
    }
    LT_CUDA_CHECK(status);
    return ptr;
  }

  void free(void* ptr) override {
    DeviceGuard guard(device_);
    LT_CUDA_CHECK(cudaFree(ptr));
  }

  EventHandle record_event(StreamId stream) override {
    DeviceGuard guard(device_);
    // Events are reused: creating one costs a driver call, and a training
    // step may free thousands of cross-stream blocks.
    cudaEvent_t event = nullptr;
    if (idle_events_.empty()) {
      LT_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    } else {
      event = idle_events_.back();
      idle_events_.pop_back();
    }
    LT_CUDA_CHECK(cudaEventRecord(event, reinterpret_cast<cudaStream_t>(stream)));
    return reinterpret_cast<EventHandle>(event);
  }

  bool event_done(EventHandle handle) override {
    cudaError_t status = cudaEventQuery(reinterpret_cast<cudaEvent_t>(handle));
    if (status == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    LT_CUDA_CHECK(status);
    return true;
  }

  void wait_event(EventHandle handle) override {
    LT_CUDA_CHECK(cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(handle)));
  }

  void release_event(EventHandle handle) override {
    idle_events_.push_back(reinterpret_cast<cudaEvent_t>(handle));
  }

  DeviceMemoryInfo memory_info() override {
    DeviceGuard guard(device_);
    DeviceMemoryInfo info;
    LT_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
    return info;
  }

 private:
  int device_;
  std::vector<cudaEvent_t> idle_events_;
};

}  // namespace

CudaCachingAllocator::CudaCachingAllocator(int device, CachingConfig config)
    : device_(device),
      raw_(std::make_unique<CudaRawMemory>(device)),
      policy_(std::make_unique<CachingPolicy>(*raw_, Device::cuda(device).str(), config)) {}

CudaCachingAllocator::~CudaCachingAllocator() = default;

void* CudaCachingAllocator::allocate(size_t bytes) {
  return policy_->allocate(bytes, current_stream(device()).id());
}

void* CudaCachingAllocator::allocate(size_t bytes, const Stream& stream) {
  LT_CHECK(stream.device() == device(), "allocation on ", device().str(), " for a stream on ",
           stream.device().str());
  return policy_->allocate(bytes, stream.id());
}

void CudaCachingAllocator::deallocate(void* ptr, size_t /*bytes*/) {
  policy_->deallocate(ptr);
}

void CudaCachingAllocator::record_stream(void* ptr, const Stream& stream) {
  LT_CHECK(stream.device() == device(), "record_stream of a buffer on ", device().str(),
           " with a stream on ", stream.device().str());
  policy_->record_stream(ptr, stream.id());
}

AllocatorStats CudaCachingAllocator::stats() const {
  CachingStats s = policy_->stats();
  return {s.requested_bytes, s.peak_requested_bytes, s.allocation_count, s.live_allocations};
}

void CudaCachingAllocator::reset_peak() {
  policy_->reset_peak();
}

CachingStats CudaCachingAllocator::caching_stats() const {
  return policy_->stats();
}

void CudaCachingAllocator::empty_cache() {
  policy_->empty_cache();
}

CudaCachingAllocator& caching_allocator(int device) {
  static std::mutex mutex;
  static auto* allocators = new std::map<int, std::unique_ptr<CudaCachingAllocator>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = allocators->find(device);
  if (it != allocators->end()) return *it->second;
  LT_CHECK(device >= 0 && device < device_count(), "CUDA device ", device, " does not exist (",
           device_count(), " visible)");
  auto& slot = (*allocators)[device];
  slot = std::make_unique<CudaCachingAllocator>(device);
  return *slot;
}

}  // namespace lt::cuda
