#include "core/allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>

#include "core/device_backend.h"
#include "core/error.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#endif

namespace lt {

void AllocationCounters::on_allocate(size_t bytes) {
  int64_t now = current_.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  count_.fetch_add(1);
  live_.fetch_add(1);
}

void AllocationCounters::on_deallocate(size_t bytes) {
  current_.fetch_sub(static_cast<int64_t>(bytes));
  live_.fetch_sub(1);
}

AllocatorStats AllocationCounters::snapshot() const {
  return {current_.load(), peak_.load(), count_.load(), live_.load()};
}

void AllocationCounters::reset_peak() {
  peak_.store(current_.load());
}

namespace {
// Blocks of kHugePageFrom bytes or more are aligned to kHugePage and backed
// by transparent huge pages where the kernel allows (Note [Huge pages for
// large host tensors]). 32 MiB is also glibc's largest mmap threshold, so
// such blocks always get a mapping of their own.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugePageFrom = CpuAllocator::kOwnMappingFrom;
}  // namespace

void* CpuAllocator::allocate(size_t bytes) {
  // aligned_alloc wants a size that is a multiple of the alignment; a
  // zero-byte request still gets one line so the pointer is unique.
  const size_t alignment = bytes >= kHugePageFrom ? kHugePage : kAlignment;
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded == 0) rounded = alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  LT_CHECK(p != nullptr, "host allocation of ", bytes, " bytes failed (",
           counters_.snapshot().current_bytes, " bytes already allocated)");
  // Note [Huge pages for large host tensors]: glibc maps a large block
  // fresh and unmaps it when freed, so every large tensor's first touch
  // takes one page fault per 4 KiB. In a VM each fault is a trip through
  // the hypervisor: filling fresh memory ran at 0.4-0.7 GB/s on the dev VM
  // against 6-7 GB/s once faulted, and the states of a stage on disk are
  // read into fresh memory every step. Asking for transparent huge pages
  // (where the kernel's THP mode is "madvise" or "always") makes it one
  // fault per 2 MiB: 6.4 GB/s fresh, and freeing 2 GB took 0.01 s instead
  // of 0.4 s. A kernel without THP ignores the advice.
  if (alignment == kHugePage) ::madvise(p, rounded, MADV_HUGEPAGE);
  counters_.on_allocate(bytes);
  return p;
}

void CpuAllocator::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  counters_.on_deallocate(bytes);
}

CpuAllocator& cpu_allocator() {
  static CpuAllocator* instance =
      new CpuAllocator();  // never destroyed: tensors may outlive statics
  return *instance;
}

namespace {
std::mutex registry_mutex;
Allocator* (*cuda_factory)(int) = nullptr;
thread_local Allocator* cpu_override = nullptr;
}  // namespace

CpuAllocatorOverride::CpuAllocatorOverride(Allocator& allocator) : previous_(cpu_override) {
  LT_CHECK(allocator.device().is_cpu(), "CpuAllocatorOverride: the allocator serves ",
           allocator.device().str(), ", not the CPU");
  cpu_override = &allocator;
}

CpuAllocatorOverride::~CpuAllocatorOverride() {
  cpu_override = previous_;
}

void register_device_allocator(DeviceKind kind, Allocator* (*factory)(int)) {
  LT_CHECK(kind == DeviceKind::CUDA, "only CUDA allocators can be registered");
  std::lock_guard<std::mutex> lock(registry_mutex);
  cuda_factory = factory;
}

void ensure_device_backend() {
#ifdef LT_WITH_CUDA
  static const bool registered = (cuda::register_backend(), true);
  (void)registered;
#endif
}

Allocator& default_allocator(Device device) {
  if (device.is_cpu()) return cpu_override ? *cpu_override : cpu_allocator();
  ensure_device_backend();
  std::lock_guard<std::mutex> lock(registry_mutex);
  LT_CHECK(cuda_factory != nullptr, "device ", device.str(),
           " requested but this build has no CUDA backend (configure with -DLT_CUDA=ON)");
  return *cuda_factory(device.index);
}

}  // namespace lt
