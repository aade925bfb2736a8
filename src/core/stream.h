#pragma once
// Streams and events as values, so that executors put copies and compute on
// separate streams and order them with events. The header needs no CUDA:
// on the CPU a stream is a null handle whose work is always complete, and
// an event is a timestamp, so an executor written against these types runs
// unchanged in the CPU build (its "copies" are then synchronous).
//
// Each thread has a current stream per device (StreamGuard sets it). The
// CUDA caching allocator tags every block with the current stream of the
// allocating thread; see core/caching_policy.cpp for why that matters.
#include <chrono>
#include <memory>

#include "core/allocator.h"
#include "core/caching_policy.h"
#include "core/device.h"

namespace lt {

class Stream {
 public:
  // The CPU stream.
  Stream() = default;
  // The device's default stream (the CUDA legacy default stream, handle 0).
  static Stream default_stream(Device device);
  // A new stream. On CUDA it does not synchronize with the default stream
  // (cudaStreamNonBlocking); a lower `priority` number is a higher priority
  // (CUDA's convention; 0 is the default, -1 or below is high, clamped to
  // what the device offers). The stream lives while any copy of this value
  // does; the last one synchronizes it before destroying it, so that no
  // block the caching allocator tagged with it can be reused on a new
  // stream that happens to get the same handle while its work still runs.
  static Stream create(Device device, int priority = 0);

  Device device() const { return device_; }
  // The cudaStream_t, or nullptr (the CPU stream and the CUDA default stream).
  void* handle() const { return handle_; }
  StreamId id() const { return reinterpret_cast<StreamId>(handle_); }
  bool is_default() const { return handle_ == nullptr; }

  // Blocks until all work enqueued on the stream has finished.
  void synchronize() const;
  // True when all work enqueued so far has finished.
  bool query() const;

  bool operator==(const Stream& other) const {
    return device_ == other.device_ && handle_ == other.handle_;
  }

 private:
  Stream(Device device, void* handle, std::shared_ptr<void> owner)
      : device_(device), handle_(handle), owner_(std::move(owner)) {}

  Device device_ = Device::cpu();
  void* handle_ = nullptr;
  std::shared_ptr<void> owner_;  // destroys a created stream; empty for default streams
};

// The calling thread's current stream on `device` (the default stream
// unless a StreamGuard or set_current_stream says otherwise).
Stream current_stream(Device device);
void set_current_stream(const Stream& stream);

// Makes `stream` the current stream of its device for the guard's scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

// A marker in a stream. Not copyable: an event is one thing in one place;
// move it or share it by pointer. The CUDA event is created on first
// record, on the stream's device.
class Event {
 public:
  // How synchronize() waits on a CUDA event. Default: as the device's
  // schedule says, which with a spare core is a spin (lowest latency).
  // Sleep: the thread blocks until the event is done, giving its core to
  // the host's own work; for threads that wait on long copies while the
  // CPU is busy (the streaming copy engines beside the optimizer).
  enum class HostWait { Default, Sleep };
  // Timing costs a little on CUDA (timestamps force extra work), so it is
  // off unless asked for; elapsed_ms needs it on both events.
  explicit Event(bool enable_timing = false, HostWait host_wait = HostWait::Default)
      : timing_(enable_timing), sleep_(host_wait == HostWait::Sleep) {}
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Captures the work enqueued on `stream` so far.
  void record(const Stream& stream);
  // Makes work enqueued on `stream` after this call wait until the event
  // has completed (cudaStreamWaitEvent); the host does not wait, except for
  // the CPU stream, whose work runs on the host as it is enqueued. A no-op
  // when the event was never recorded.
  void wait(const Stream& stream) const;
  // Blocks the host until the event has completed.
  void synchronize() const;
  // True when the event has completed, or was never recorded.
  bool query() const;
  // Milliseconds from this event to `end`; both recorded, with timing on,
  // and `end` completed.
  float elapsed_ms(const Event& end) const;

  bool recorded() const { return recorded_; }
  Device device() const { return device_; }

 private:
  bool timing_ = false;
  bool sleep_ = false;
  bool recorded_ = false;
  Device device_ = Device::cpu();
  void* handle_ = nullptr;                            // cudaEvent_t once recorded on a CUDA stream
  std::chrono::steady_clock::time_point cpu_time_{};  // when recorded on the CPU
};

// An allocator whose blocks may be used by work on streams other than the
// one they were allocated on (the CUDA caching allocator, the pinned pool).
class StreamAwareAllocator : public Allocator {
 public:
  // `ptr` (a live allocation) is also used by work on `stream`: when it is
  // freed, its memory is not reused until the work enqueued on `stream` by
  // then has finished.
  virtual void record_stream(void* ptr, const Stream& stream) = 0;
};

// record_stream when `allocator` tracks streams; a no-op for the others
// (the host heap, whose users never run asynchronously).
void record_stream(Allocator& allocator, void* ptr, const Stream& stream);

}  // namespace lt
