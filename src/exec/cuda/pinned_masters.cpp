// Only CUDA builds upload f32 masters (Note [Pinned masters]).
#ifdef LT_WITH_CUDA

#include "exec/cuda/pinned_masters.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

#include "core/cuda/runtime_calls.h"
#include "core/error.h"
#include "exec/weight_binding.h"

namespace lt::exec {

namespace {

constexpr size_t kPage = size_t{4} << 10;
// As the CPU allocator does for large blocks (Note [Huge pages for large
// host tensors]): one fault per 2 MiB when the memory is first touched.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugePageFrom = size_t{32} << 20;

class PinnedMasterAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    const size_t alignment = bytes >= kHugePageFrom ? kHugePage : kPage;
    const size_t rounded = (std::max<size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
    void* p = std::aligned_alloc(alignment, rounded);
    LT_CHECK(p != nullptr, "pinned masters: host allocation of ", bytes, " bytes failed (",
             counters_.snapshot().current_bytes, " bytes pinned already)");
    if (alignment == kHugePage) ::madvise(p, rounded, MADV_HUGEPAGE);
    try {
      cuda::host_register(p, rounded);
    } catch (...) {
      std::free(p);
      throw;
    }
    counters_.on_allocate(bytes);
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    if (ptr == nullptr) return;
    cuda::host_unregister(ptr);
    std::free(ptr);
    counters_.on_deallocate(bytes);
  }
  Device device() const override { return Device::cpu(); }
  AllocatorStats stats() const override { return counters_.snapshot(); }
  void reset_peak() override { counters_.reset_peak(); }

 private:
  AllocationCounters counters_;
};

}  // namespace

Allocator& pinned_master_allocator() {
  static auto* instance = new PinnedMasterAllocator();  // never destroyed: tensors outlive statics
  return *instance;
}

void pin_master(const Tensor& param) {
  LT_CHECK(param.device().is_cpu() && param.dtype() == DType::F32 && param.is_contiguous(),
           "pinned masters: a master must be a contiguous f32 CPU tensor, got ", param.str());
  Tensor pinned = Tensor::empty(param.shape(), DType::F32, pinned_master_allocator());
  pinned.copy_(param);
  point_at(param, pinned);
}

}  // namespace lt::exec

#endif  // LT_WITH_CUDA
