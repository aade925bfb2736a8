#pragma once
// The streaming executor's GPU (issue 7): device memory is the CUDA caching
// allocator, the device computes in bf16, and copies run on two CUDA
// streams of their own (lt::Stream), each fed by a host worker thread.
//
// Host state: the f32 masters and the optimizer stay in host memory; a
// parameter also has a bf16 copy in page-locked memory, registered as the
// optimizer's bf16 shadow, so the CPU update writes it in its own pass and
// weight uploads copy it as it is (half the bytes, no conversion pass);
// or, with exec.weight_uploads f32, its master moves into pinned memory
// (Note [Pinned masters]) and an upload copies the f32 master a piece at a
// time into a device staging buffer, from which a cast on the upload
// stream writes the bf16 slot (round to nearest even, as the CPU update
// rounds its shadows: the same bits either way).
//
// Ordering (no device-wide synchronize anywhere; the compute stream is
// waited for a span behind the compute thread, Note [One use queued ahead]
// in exec/streaming.cpp, and timed by events, so that StepStats times the
// GPU's work and not its queueing):
//  - upload(): at the call (on the compute thread) an event is recorded on
//    the compute stream. The worker waits on the host for `after` (the
//    stage's optimizer update, which writes the shadow), makes the upload
//    stream wait for that event (cudaStreamWaitEvent) and then copies. The
//    destination slot was last used by compute queued before the call, so
//    the copy never overwrites weights a queued kernel still reads.
//  - The ticket completes when an event recorded on the upload stream after
//    the copies has completed (the worker waits for it), and the executor
//    waits for the ticket before it queues the compute that reads the
//    slot: compute never reads a weight before it has landed.
//  - download(): at the call an event is recorded on the compute stream
//    (after a conversion there when the host buffer's dtype differs; the
//    executor's gradient slabs are bf16 in pinned memory, so gradients copy
//    as they are and the CPU optimizer takes them in bf16); the download
//    stream waits for it, so the copy reads gradients only after the
//    backward that made them.
//    The worker waits for the copy's event, drops its device references
//    (the memory is then free to reuse) and runs `then`.
#include <cstddef>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/pinned_pool.h"
#include "core/stream.h"
#include "exec/streaming_device.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace lt::exec {

namespace cuda_copy {
// cudaMemcpyAsync of `bytes` on `stream` (a cudaStream_t) of `device`
// (defined in streaming_device_cuda.cu; throws lt::Error on failure).
void copy_async(int device, void* dst, const void* src, size_t bytes, void* stream);
}  // namespace cuda_copy

class CudaStreamingDevice final : public StreamingDevice {
 public:
  // `masters` (f32 CPU parameters, the optimizer's order) get pinned bf16
  // shadows, filled now and registered with `optimizer`; the destructor
  // removes them again. A master without memory yet (its stage starts on
  // disk) gets an unfilled shadow: the streaming executor fills it
  // (upload_copy_of) once the master has values. `shared_shadows` (per master, or empty): the bf16
  // copies the ranks of a host share (exec/shared_weights.h), in memory
  // registered with CUDA, used instead of shadows of this device's own.
  // `f32_uploads` (per master, or empty: none): the masters uploaded as
  // they are (exec.weight_uploads f32), moved into pinned memory now and
  // given no shadow; not with shared shadows.
  CudaStreamingDevice(const nn::NamedParameters& masters, optim::Optimizer& optimizer,
                      int device = 0, std::vector<Tensor> shared_shadows = {},
                      const std::vector<bool>& f32_uploads = {});
  // Without masters: uploads copy host tensors already in bf16 (streamed
  // generation's pinned weights, exec/streamed_weights.h).
  explicit CudaStreamingDevice(int device = 0);
  ~CudaStreamingDevice() override;
  CudaStreamingDevice(const CudaStreamingDevice&) = delete;
  CudaStreamingDevice& operator=(const CudaStreamingDevice&) = delete;

  std::string memory_space() const override { return "gpu"; }
  Allocator& memory() override;
  DType compute_dtype() const override { return DType::BF16; }
  Ticket upload(CopyList copies, Ticket after, std::string label) override;
  Ticket download(CopyList copies, std::function<void()> then, std::string label) override;
  std::unique_ptr<Scope> compute_scope() override;
  Allocator& host_memory() override { return pinned_; }
  void finish_compute() override { compute_.synchronize(); }
  void begin_compute_span() override;
  void end_compute_span(SpanDone done) override;
  void drain_compute() override;
  void mark_compute() override;
  std::optional<Clock::time_point> compute_idle_since() override;
  Tensor upload_copy_of(size_t index) const override {
    return index < shadow_of_.size() ? shadow_of_[index] : Tensor();
  }

  const Stream& compute_stream() const { return compute_; }

 private:
  // The bytes an upload copies for destination `dst` from `src`: the bf16
  // shadow of a registered master, `src` itself when the dtypes match, or
  // a pinned f32 master that copy_converting() converts.
  Tensor upload_source(const Tensor& dst, const Tensor& src) const;
  // On the h2d worker: `src` (pinned f32) through staging_ into `dst`
  // (bf16), all on the upload stream.
  void copy_converting(const Tensor& dst, const Tensor& src);

  int device_;
  optim::Optimizer* optimizer_ = nullptr;  // holds the shadows; null without masters
  size_t shadow_count_ = 0;
  Stream compute_, upload_stream_, download_stream_;
  PinnedHostPool pinned_;
  std::unordered_map<const void*, Tensor> shadows_;  // master's data -> its pinned bf16 copy
  std::vector<Tensor> shadow_of_;  // per master: its bf16 copy, or undefined (f32 uploads)
  std::unordered_set<const void*> pinned_masters_;  // data of the masters uploaded as f32
  Tensor staging_;  // device f32, kUploadStagingBytes; only with f32 uploads
  // Compute spans (Note [One use queued ahead]): timing events on the
  // compute stream, placed on the host clock through `reference_`, recorded
  // when the stream was idle at `reference_host_`.
  struct Span {
    Event begin{true}, end{true};
    SpanDone done;
  };
  Clock::time_point on_host(const Event& e) const;
  void finish_oldest_span();
  void set_reference();
  Span open_span_;
  std::vector<Span> queued_spans_;  // at most two, oldest first
  Event reference_{true};
  Clock::time_point reference_host_{};
  Event mark_{true};  // mark_compute()'s
  // Last: the workers finish their queued copies while all above exist.
  WorkQueue h2d_{"h2d"};
  WorkQueue d2h_{"d2h"};
};

}  // namespace lt::exec
