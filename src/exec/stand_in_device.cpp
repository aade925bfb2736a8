#include "exec/stand_in_device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>

#include "core/error.h"

namespace lt::exec {

namespace {

void copy_all(const CopyList& copies) {
  for (const auto& [dst, src] : copies) {
    LT_CHECK(dst.is_contiguous() && src.is_contiguous() && dst.shape() == src.shape() &&
                 dst.dtype() == src.dtype(),
             "stand-in copy: needs contiguous tensors of one shape and dtype, got ", dst.str(),
             " <- ", src.str());
    std::memcpy(dst.data_ptr(), src.data_ptr(), src.nbytes());
  }
}

class OverrideScope final : public StreamingDevice::Scope {
 public:
  explicit OverrideScope(Allocator& memory) : override_(memory) {}

 private:
  CpuAllocatorOverride override_;
};

}  // namespace

CapacityAllocator::CapacityAllocator(int64_t capacity_bytes) : capacity_(capacity_bytes) {
  LT_CHECK(capacity_bytes >= 0, "device stand-in: capacity must be >= 0 bytes, got ",
           capacity_bytes);
}

void* CapacityAllocator::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t in_use = counters_.snapshot().current_bytes;
  LT_CHECK(capacity_ == 0 || in_use + static_cast<int64_t>(bytes) <= capacity_,
           "device stand-in: out of memory: a request of ", bytes, " bytes with ", in_use,
           " bytes in use exceeds the capacity of ", capacity_,
           " bytes (exec.device_memory_gb; a schedule that keeps fewer activations, or a "
           "smaller exec.micro_batch, needs less)");
  // Not through cpu_allocator(): this memory is the device's, and must not
  // show in the host's statistics.
  constexpr size_t kAlignment = CpuAllocator::kAlignment;
  const size_t rounded =
      std::max<size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  void* p = std::aligned_alloc(kAlignment, rounded);
  LT_CHECK(p != nullptr, "device stand-in: host allocation of ", bytes, " bytes failed");
  counters_.on_allocate(bytes);
  return p;
}

void CapacityAllocator::deallocate(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.on_deallocate(bytes);
}

StandInDevice::StandInDevice(const StandInOptions& options)
    : memory_(options.capacity_bytes),
      separate_host_memory_(options.separate_host_memory),
      copies_when_waited_(options.copies_when_waited) {
  if (options.max_copy_delay_us > 0) {
    h2d_.inject_delays(options.max_copy_delay_us, options.delay_seed);
    d2h_.inject_delays(options.max_copy_delay_us, options.delay_seed + 1);
  }
}

Ticket StandInDevice::upload(CopyList copies, Ticket after, std::string label) {
  if (copies_when_waited_) {
    if (after.valid()) after.get();
    TraceSpan span(trace_, "h2d", label);
    copy_all(copies);
    return ready_ticket();
  }
  return h2d_.enqueue([copies = std::move(copies), after = std::move(after), trace = trace_,
                       label = std::move(label)] {
    if (after.valid()) after.get();
    TraceSpan span(trace, "h2d", label);
    copy_all(copies);
  });
}

Ticket StandInDevice::download(CopyList copies, std::function<void()> then, std::string label) {
  if (copies_when_waited_) {
    uint64_t number = 0;
    {
      std::lock_guard<std::mutex> lock(pending_mutex_);
      number = downloads_issued_++;
      pending_downloads_.push_back([copies = std::move(copies), then = std::move(then),
                                    trace = trace_, label = std::move(label)]() mutable {
        TraceSpan span(trace, "d2h", label);
        copy_all(copies);
        copies.clear();
        if (then) then();
      });
    }
    return std::async(std::launch::deferred, [this, number] { land_downloads_through(number); })
        .share();
  }
  return d2h_.enqueue([copies = std::move(copies), then = std::move(then), trace = trace_,
                       label = std::move(label)]() mutable {
    TraceSpan span(trace, "d2h", label);
    copy_all(copies);
    copies.clear();  // the device tensors are free once copied
    if (then) then();
  });
}

void StandInDevice::land_downloads_through(uint64_t last) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  while (downloads_landed_ <= last) {
    std::function<void()> copy = std::move(pending_downloads_.front());
    pending_downloads_.pop_front();
    ++downloads_landed_;
    copy();  // frees the copy's device tensors when it returns
  }
}

std::unique_ptr<StreamingDevice::Scope> StandInDevice::compute_scope() {
  return std::make_unique<OverrideScope>(memory_);
}

}  // namespace lt::exec
