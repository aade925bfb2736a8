#pragma once
// What the streaming executor needs from the device it streams weights to:
// device memory, a host-to-device and a device-to-host copy engine, and a
// scope that makes the compute thread's tensors device tensors. The CPU
// stand-in (exec/stand_in_device.h) implements it with a capacity-limited
// allocator and worker threads; a CUDA device implements the same calls with
// the caching allocator, cudaMemcpyAsync on two lt::Streams and events (the
// tickets), and a bf16 weight copy.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "exec/trace.h"
#include "exec/work_queue.h"

namespace lt::exec {

// (destination, source) pairs: contiguous tensors of the same shape.
using CopyList = std::vector<std::pair<Tensor, Tensor>>;

class StreamingDevice {
 public:
  virtual ~StreamingDevice() = default;
  // The key of StepStats::peak_bytes for this memory ("device", "gpu").
  virtual std::string memory_space() const = 0;
  virtual Allocator& memory() = 0;
  // The type the device computes in and holds its weight copies in (f32 on
  // the stand-in, so that it matches the resident executor bit for bit).
  virtual DType compute_dtype() const = 0;
  // Host -> device, on the upload engine, after `after` has completed and
  // after every upload queued before it. `label` names it in a trace.
  virtual Ticket upload(CopyList copies, Ticket after, std::string label) = 0;
  // Device -> host, on the download engine in queue order; `then` (may be
  // empty) runs on the host once the bytes have landed.
  virtual Ticket download(CopyList copies, std::function<void()> then, std::string label) = 0;
  // While the returned object lives, tensors the calling thread creates
  // without naming an allocator live in device memory.
  class Scope {
   public:
    virtual ~Scope() = default;
  };
  virtual std::unique_ptr<Scope> compute_scope() = 0;
  // Host memory for buffers the copy engines fill or read (gradient slabs,
  // offloaded activations): page-locked on a GPU, where copies from
  // pageable memory run several times slower.
  virtual Allocator& host_memory() { return cpu_allocator(); }
  // Returns once the compute queued so far has run (a GPU device waits for
  // its compute stream). The offload executors call it at the end of each
  // stage, so that their stage times are the device's and not the time to
  // queue the work; the streaming executor times compute spans instead
  // (below). A no-op on the stand-in.
  virtual void finish_compute() {}

  // Note [One use queued ahead]: the streaming executor times each stage
  // use as a compute span, and waits only for the span before the last.
  using Clock = TraceRecorder::Clock;
  // Gets a finished span's interval on the host clock: on a GPU, when the
  // device ran it (from timing events), some time after end_compute_span.
  using SpanDone = std::function<void(Clock::time_point begin, Clock::time_point end)>;
  // Opens a span: the compute queued from now on is in it.
  virtual void begin_compute_span() { span_begin_ = Clock::now(); }
  // Closes the open span, then returns once the span before it has run and
  // its `done` has been called. The stand-in computes as the work is
  // queued: its span is the host's interval, `done` called at once.
  virtual void end_compute_span(SpanDone done) { done(span_begin_, Clock::now()); }
  // Returns once every span has run and its `done` has been called.
  virtual void drain_compute() {}
  // Marks the compute queued so far (spans or not); compute_idle_since()
  // then says when it had all run: on the host clock, or nullopt while it
  // still runs. A host wait counts as exposed only after that (the
  // stand-in, which computes as work is queued: always exposed).
  virtual void mark_compute() {}
  virtual std::optional<Clock::time_point> compute_idle_since() { return Clock::time_point::min(); }
  // The host tensor, in compute_dtype(), that the device uploads for
  // master number `index` (in the order the device was given them) and
  // that the optimizer keeps current (the CUDA device's pinned bf16
  // shadow); undefined where uploads copy the master itself (the stand-in).
  // With the states on disk the executor uploads from it (and fills it for
  // a master that had no memory when the device was built).
  virtual Tensor upload_copy_of(size_t /*index*/) const { return Tensor(); }

  Tensor empty(const Shape& shape, DType dtype) { return Tensor::empty(shape, dtype, memory()); }
  // Copies queued from now on are recorded on the "h2d" and "d2h" tracks
  // of `trace` (null: not recorded).
  void set_trace(TraceRecorder* trace) { trace_ = trace; }

 protected:
  TraceRecorder* trace_ = nullptr;

 private:
  Clock::time_point span_begin_{};
};

}  // namespace lt::exec
