// Only CUDA builds have a GPU streaming device (see the header for the
// ordering of its copies).
#ifdef LT_WITH_CUDA

#include "exec/cuda/streaming_device_cuda.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/cuda/caching_allocator.h"
#include "core/error.h"
#include "exec/cuda/pinned_masters.h"
#include "exec/memory_budget.h"

namespace lt::exec {

namespace {

class ComputeScope final : public StreamingDevice::Scope {
 public:
  explicit ComputeScope(const Stream& stream) : guard_(stream) {}

 private:
  StreamGuard guard_;
};

// `converts`: an f32 master uploaded into a bf16 slot (copy_converting).
void check_pair(const Tensor& dst, const Tensor& src, const char* what, bool converts = false) {
  LT_CHECK(dst.is_contiguous() && src.is_contiguous() && dst.numel() == src.numel() &&
               (dst.dtype() == src.dtype() ||
                (converts && src.dtype() == DType::F32 && dst.dtype() == DType::BF16)),
           "CUDA streaming device: ", what, " needs contiguous tensors of one size and dtype, got ",
           dst.str(), " <- ", src.str());
}

}  // namespace

CudaStreamingDevice::CudaStreamingDevice(const nn::NamedParameters& masters,
                                         optim::Optimizer& optimizer, int device,
                                         std::vector<Tensor> shared_shadows,
                                         const std::vector<bool>& f32_uploads)
    : device_(device),
      optimizer_(&optimizer),
      compute_(Stream::create(Device::cuda(device))),
      upload_stream_(Stream::create(Device::cuda(device))),
      download_stream_(Stream::create(Device::cuda(device))) {
  LT_CHECK(optimizer.size() == masters.size(), "CUDA streaming device: the optimizer holds ",
           optimizer.size(), " parameters, the model ", masters.size());
  LT_CHECK(shared_shadows.empty() || shared_shadows.size() == masters.size(),
           "CUDA streaming device: ", shared_shadows.size(), " shared bf16 copies for ",
           masters.size(), " parameters");
  LT_CHECK(f32_uploads.empty() || (f32_uploads.size() == masters.size() && shared_shadows.empty()),
           "CUDA streaming device: f32 uploads named for ", f32_uploads.size(), " of ",
           masters.size(), " parameters", shared_shadows.empty() ? "" : ", with shared copies");
  shadow_of_.resize(masters.size());
  for (size_t i = 0; i < masters.size(); ++i) {
    const auto& [name, p] = masters[i];
    const bool has_memory = p.storage() != nullptr;  // else its stage starts on disk
    LT_CHECK((!has_memory || p.device().is_cpu()) && p.dtype() == DType::F32 && p.is_contiguous(),
             "CUDA streaming device: master parameter '", name,
             "' must be a contiguous f32 CPU tensor, got ", has_memory ? p.str() : "no memory");
    if (!f32_uploads.empty() && f32_uploads[i]) {
      LT_CHECK(has_memory, "CUDA streaming device: master '", name,
               "' has no memory to upload as f32");
      pin_master(p);
      pinned_masters_.insert(p.data_ptr());
      continue;
    }
    Tensor shadow;
    if (shared_shadows.empty()) {
      shadow = Tensor::empty(p.shape(), DType::BF16, pinned_);
      // Round to nearest even, as the optimizer's later writes.
      if (has_memory) shadow.copy_(p);
    } else {
      shadow = shared_shadows[i];  // filled by local rank 0
    }
    optimizer.set_bf16_shadow(i, shadow);
    shadow_of_[i] = shadow;
    if (has_memory) shadows_[p.data_ptr()] = shadow;
  }
  shadow_count_ = masters.size();
  if (!pinned_masters_.empty())
    staging_ = Tensor::empty({kUploadStagingBytes / 4}, DType::F32, memory());
}

CudaStreamingDevice::CudaStreamingDevice(int device)
    : device_(device),
      compute_(Stream::create(Device::cuda(device))),
      upload_stream_(Stream::create(Device::cuda(device))),
      download_stream_(Stream::create(Device::cuda(device))) {}

CudaStreamingDevice::~CudaStreamingDevice() {
  // The executor using this device has finished its updates (it is
  // destroyed first); the optimizer must not write freed pinned memory.
  for (size_t i = 0; i < shadow_count_; ++i) optimizer_->set_bf16_shadow(i, Tensor());
}

Allocator& CudaStreamingDevice::memory() {
  return cuda::caching_allocator(device_);
}

Tensor CudaStreamingDevice::upload_source(const Tensor& dst, const Tensor& src) const {
  LT_CHECK(dst.device().is_cuda() && src.device().is_cpu(),
           "CUDA streaming device: upload copies host to device, got ", dst.str(), " <- ",
           src.str());
  if (dst.dtype() == src.dtype()) return src;
  if (dst.dtype() == DType::BF16 && pinned_masters_.contains(src.data_ptr())) return src;
  const auto it = shadows_.find(src.data_ptr());
  LT_CHECK(it != shadows_.end() && dst.dtype() == DType::BF16,
           "CUDA streaming device: an upload from ", src.str(), " to ", dst.str(),
           " converts dtype, which only a registered f32 master (its bf16 shadow, or pinned "
           "for f32 uploads) can do");
  return it->second;
}

void CudaStreamingDevice::copy_converting(const Tensor& dst, const Tensor& src) {
  StreamGuard on_upload(upload_stream_);  // the casts run on the upload stream, after the copies
  const int64_t piece = staging_.numel();
  const auto* from = static_cast<const float*>(src.data_ptr());
  for (int64_t at = 0; at < src.numel(); at += piece) {
    const int64_t n = std::min(piece, src.numel() - at);
    cuda_copy::copy_async(device_, staging_.data_ptr(), from + at, static_cast<size_t>(n) * 4,
                          upload_stream_.handle());
    const Tensor staged =
        Tensor::from_storage(staging_.storage(), staging_.offset(), {n}, {1}, DType::F32);
    Tensor::from_storage(dst.storage(), dst.offset() + at, {n}, {1}, dst.dtype()).copy_(staged);
  }
}

Ticket CudaStreamingDevice::upload(CopyList copies, Ticket after, std::string label) {
  for (auto& [dst, src] : copies) {
    src = upload_source(dst, src);
    check_pair(dst, src, "an upload", /*converts=*/true);
  }
  // Everything queued on the compute stream so far, including the last use
  // of the memory these copies overwrite.
  auto compute_done = std::make_shared<Event>();
  compute_done->record(compute_);
  return h2d_.enqueue([this, copies = std::move(copies), after = std::move(after), compute_done,
                       trace = trace_, label = std::move(label)]() mutable {
    if (after.valid()) after.get();  // the update that writes the shadow (or the master)
    TraceSpan span(trace, "h2d", label);
    compute_done->wait(upload_stream_);
    for (const auto& [dst, src] : copies) {
      if (src.dtype() != dst.dtype()) {
        copy_converting(dst, src);
        continue;
      }
      cuda_copy::copy_async(device_, dst.data_ptr(), src.data_ptr(), src.nbytes(),
                            upload_stream_.handle());
    }
    Event landed(false, Event::HostWait::Sleep);  // the optimizer may need this core
    landed.record(upload_stream_);
    landed.synchronize();
  });
}

Ticket CudaStreamingDevice::download(CopyList copies, std::function<void()> then,
                                     std::string label) {
  {
    StreamGuard on_compute(compute_);
    for (auto& [dst, src] : copies) {
      LT_CHECK(dst.device().is_cpu() && src.device().is_cuda(),
               "CUDA streaming device: download copies device to host, got ", dst.str(), " <- ",
               src.str());
      // bf16 gradients become the f32 the host slabs hold, on the device.
      src = src.dtype() == dst.dtype() ? src.contiguous() : src.to(dst.dtype()).contiguous();
      check_pair(dst, src, "a download");
    }
  }
  auto produced = std::make_shared<Event>();
  produced->record(compute_);
  return d2h_.enqueue([this, copies = std::move(copies), then = std::move(then), produced,
                       trace = trace_, label = std::move(label)]() mutable {
    TraceSpan span(trace, "d2h", label);
    produced->wait(download_stream_);
    for (const auto& [dst, src] : copies) {
      cuda_copy::copy_async(device_, dst.data_ptr(), src.data_ptr(), src.nbytes(),
                            download_stream_.handle());
    }
    Event landed(false, Event::HostWait::Sleep);  // the optimizer may need this core
    landed.record(download_stream_);
    landed.synchronize();
    copies.clear();  // the device memory is free once copied
    if (then) then();
  });
}

void CudaStreamingDevice::set_reference() {
  compute_.synchronize();
  // The stream is idle: the event completes as it is recorded. Its host
  // time is taken as the middle of the record and the wait for it.
  const Clock::time_point before = Clock::now();
  reference_.record(compute_);
  reference_.synchronize();
  reference_host_ = before + (Clock::now() - before) / 2;
}

StreamingDevice::Clock::time_point CudaStreamingDevice::on_host(const Event& e) const {
  const double ms = static_cast<double>(reference_.elapsed_ms(e));
  return reference_host_ +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

void CudaStreamingDevice::begin_compute_span() {
  if (!reference_.recorded()) set_reference();
  open_span_ = Span();
  open_span_.begin.record(compute_);
}

void CudaStreamingDevice::end_compute_span(SpanDone done) {
  LT_CHECK(open_span_.begin.recorded(),
           "CUDA streaming device: a compute span ended that was not begun");
  open_span_.end.record(compute_);
  open_span_.done = std::move(done);
  queued_spans_.push_back(std::move(open_span_));
  while (queued_spans_.size() > 1) finish_oldest_span();
}

void CudaStreamingDevice::finish_oldest_span() {
  Span span = std::move(queued_spans_.front());
  queued_spans_.erase(queued_spans_.begin());
  span.end.synchronize();
  span.done(on_host(span.begin), on_host(span.end));
}

void CudaStreamingDevice::drain_compute() {
  open_span_ = Span();  // one a failed use began and never ended
  try {
    while (!queued_spans_.empty()) finish_oldest_span();
  } catch (...) {
    queued_spans_.clear();  // no span outlives a failed step: their `done`s point into it
    throw;
  }
  // A new reference while the stream is idle: the elapsed times stay short.
  if (reference_.recorded()) set_reference();
}

void CudaStreamingDevice::mark_compute() {
  if (reference_.recorded()) mark_.record(compute_);
}

std::optional<StreamingDevice::Clock::time_point> CudaStreamingDevice::compute_idle_since() {
  // No reference yet: nothing was timed, so nothing is known to run.
  if (!reference_.recorded() || !mark_.recorded()) return Clock::time_point::min();
  if (!mark_.query()) return std::nullopt;
  return on_host(mark_);
}

std::unique_ptr<StreamingDevice::Scope> CudaStreamingDevice::compute_scope() {
  return std::make_unique<ComputeScope>(compute_);
}

}  // namespace lt::exec

#endif  // LT_WITH_CUDA
