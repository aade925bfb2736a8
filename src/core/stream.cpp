#include "core/stream.h"

#include <utility>
#include <vector>

#include "core/error.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/runtime_calls.h"
#endif

namespace lt {

namespace {

[[noreturn, maybe_unused]] void no_cuda(Device device) {
  fail("stream or event on ", device.str(),
       " requested but this build has no CUDA backend (configure with -DLT_CUDA=ON)");
}

// Per thread, per CUDA device index: the current stream. A CPU stream is
// always the CPU stream, so it needs no slot.
thread_local std::vector<Stream> current_cuda_streams;

}  // namespace

Stream Stream::default_stream(Device device) {
  return Stream(device, nullptr, nullptr);
}

Stream Stream::create(Device device, int priority) {
  if (device.is_cpu()) return Stream();
#ifdef LT_WITH_CUDA
  void* handle = cuda::stream_create(device.index, priority);
  int index = device.index;
  std::shared_ptr<void> owner(handle, [index](void* h) { cuda::stream_destroy(index, h); });
  return Stream(device, handle, std::move(owner));
#else
  (void)priority;
  no_cuda(device);
#endif
}

void Stream::synchronize() const {
  if (device_.is_cpu()) return;
#ifdef LT_WITH_CUDA
  cuda::stream_synchronize(device_.index, handle_);
#else
  no_cuda(device_);
#endif
}

bool Stream::query() const {
  if (device_.is_cpu()) return true;
#ifdef LT_WITH_CUDA
  return cuda::stream_query(device_.index, handle_);
#else
  no_cuda(device_);
#endif
}

Stream current_stream(Device device) {
  if (device.is_cpu()) return Stream();
  auto index = static_cast<size_t>(device.index);
  if (index < current_cuda_streams.size() && current_cuda_streams[index].device() == device) {
    return current_cuda_streams[index];
  }
  return Stream::default_stream(device);
}

void set_current_stream(const Stream& stream) {
  if (stream.device().is_cpu()) return;
  auto index = static_cast<size_t>(stream.device().index);
  if (index >= current_cuda_streams.size()) current_cuda_streams.resize(index + 1);
  current_cuda_streams[index] = stream;
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() {
  set_current_stream(previous_);
}

Event::~Event() {
#ifdef LT_WITH_CUDA
  if (handle_ != nullptr) cuda::event_destroy(device_.index, handle_);
#endif
}

Event::Event(Event&& other) noexcept
    : timing_(other.timing_),
      sleep_(other.sleep_),
      recorded_(other.recorded_),
      device_(other.device_),
      handle_(other.handle_),
      cpu_time_(other.cpu_time_) {
  other.handle_ = nullptr;
  other.recorded_ = false;
}

Event& Event::operator=(Event&& other) noexcept {
  // `other` takes this event's old handle and destroys it with itself.
  std::swap(timing_, other.timing_);
  std::swap(sleep_, other.sleep_);
  std::swap(recorded_, other.recorded_);
  std::swap(device_, other.device_);
  std::swap(handle_, other.handle_);
  std::swap(cpu_time_, other.cpu_time_);
  return *this;
}

void Event::record(const Stream& stream) {
  if (stream.device().is_cpu()) {
    // The CPU stream's work is done when it is enqueued.
#ifdef LT_WITH_CUDA
    if (handle_ != nullptr) cuda::event_destroy(device_.index, handle_);
#endif
    handle_ = nullptr;
    device_ = stream.device();
    cpu_time_ = std::chrono::steady_clock::now();
    recorded_ = true;
    return;
  }
#ifdef LT_WITH_CUDA
  if (handle_ != nullptr && device_ != stream.device()) {
    cuda::event_destroy(device_.index, handle_);
    handle_ = nullptr;
  }
  if (handle_ == nullptr) handle_ = cuda::event_create(stream.device().index, timing_, sleep_);
  device_ = stream.device();
  cuda::event_record(handle_, device_.index, stream.handle());
  recorded_ = true;
#else
  no_cuda(stream.device());
#endif
}

void Event::wait(const Stream& stream) const {
  // A CPU event has completed when it is recorded: nothing to wait for.
  if (!recorded_ || handle_ == nullptr) return;
  if (stream.device().is_cpu()) {
    // Work on the CPU stream runs when it is enqueued, so it can only come
    // after the event if the host waits here.
    synchronize();
    return;
  }
#ifdef LT_WITH_CUDA
  cuda::stream_wait_event(stream.device().index, stream.handle(), handle_);
#endif
}

void Event::synchronize() const {
#ifdef LT_WITH_CUDA
  if (recorded_ && handle_ != nullptr) cuda::event_synchronize(handle_);
#endif
}

bool Event::query() const {
#ifdef LT_WITH_CUDA
  if (recorded_ && handle_ != nullptr) return cuda::event_query(handle_);
#endif
  return true;
}

float Event::elapsed_ms(const Event& end) const {
  LT_CHECK(recorded_ && end.recorded_, "elapsed_ms needs both events recorded");
  LT_CHECK(device_ == end.device_, "elapsed_ms between events on ", device_.str(), " and ",
           end.device_.str());
  if (device_.is_cpu()) {
    return std::chrono::duration<float, std::milli>(end.cpu_time_ - cpu_time_).count();
  }
  LT_CHECK(timing_ && end.timing_, "elapsed_ms needs events created with enable_timing");
#ifdef LT_WITH_CUDA
  return cuda::event_elapsed_ms(handle_, end.handle_);
#else
  no_cuda(device_);
#endif
}

void record_stream(Allocator& allocator, void* ptr, const Stream& stream) {
  if (auto* aware = dynamic_cast<StreamAwareAllocator*>(&allocator)) {
    aware->record_stream(ptr, stream);
  }
}

}  // namespace lt
