#include "optim/grad_norm_partials.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "core/pinned_pool.h"
#include "core/stream.h"
#include "optim/clip.h"
#include "optim/cuda/grad_norm.h"

namespace lt::optim {

struct GradNormPartials::State {
  Device device = Device::cpu();
  std::vector<Tensor> params;
  std::vector<int64_t> first_slot;  // per parameter; its slots run to the next one's
  int64_t slot_count = 0;
  // Per parameter: the .grad its squares were taken from (undefined: none
  // yet this step), and on a GPU the tensor the side stream reads (the
  // same, or its contiguous copy).
  std::vector<Tensor> seen;
  std::vector<Tensor> reading;
  bool armed = false;
  bool finished = false;

  // CPU: the slots.
  std::vector<double> host_slots;

  // CUDA: slot_count partial slots, then the total.
  Tensor device_slots;
  Stream side;
  Event ready;                    // on the compute stream: a gradient is final
  Event joined;                   // on the side stream: every enqueued read is done
  Event result;                   // on the compute stream: the total is on the host
  double* host_result = nullptr;  // page-locked
  bool side_pending = false;      // side-stream work not yet known complete

  bool on_cuda() const { return device.is_cuda(); }
  int64_t slots_of(size_t i) const {
    return (i + 1 < first_slot.size() ? first_slot[i + 1] : slot_count) - first_slot[i];
  }
  double* device_slot(size_t i) const {
    return static_cast<double*>(device_slots.data_ptr()) + first_slot[i];
  }

  // Waits for the side stream's work; afterwards no kernel reads a held
  // gradient or writes a slot.
  void drain() {
    if (side_pending) side.synchronize();
    side_pending = false;
  }

  void take(size_t i, const Tensor& grad) {
    LT_CHECK(grad.device() == device, "grad norm: gradient of '", params[i].name(), "' is on ",
             grad.device().str(), ", its parameter on ", device.str());
    LT_CHECK(grad.numel() == params[i].numel(), "grad norm: gradient ", grad.str(),
             " for parameter '", params[i].name(), "' of shape ", shape_str(params[i].shape()));
    seen[i] = grad;
    if (!on_cuda()) {
      grad_chunk_squares(grad, host_slots.data() + first_slot[i]);
      return;
    }
#ifdef LT_WITH_CUDA
    const Stream compute = current_stream(device);
    Tensor g = grad.contiguous();  // a copy, if any, runs on the compute stream
    ready.record(compute);
    ready.wait(side);
    cuda::enqueue_chunk_squares(g, device_slot(i), side.handle());
    reading[i] = std::move(g);
    side_pending = true;
#endif
  }

  void clear(size_t i) {
    seen[i] = Tensor();
    if (!on_cuda()) {
      std::fill_n(host_slots.begin() + first_slot[i], slots_of(i), 0.0);
      return;
    }
#ifdef LT_WITH_CUDA
    // After the side stream's earlier write to these slots; the held
    // tensor stays held until the read-back.
    cuda::enqueue_zero(device, device_slot(i), slots_of(i), side.handle());
    side_pending = true;
#endif
  }
};

GradNormPartials::GradNormPartials(const nn::NamedParameters& params)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  if (!params.empty()) s.device = params.front().second.device();
#ifndef LT_WITH_CUDA
  LT_CHECK(!s.device.is_cuda(), "grad norm: CUDA parameters in a build without CUDA");
#endif
  LT_CHECK(s.device.is_cpu() || s.device.is_cuda(), "grad norm: parameters on ", s.device.str(),
           ", which this build cannot read");
  std::unordered_set<const TensorImpl*> distinct;
  for (const auto& [name, p] : params) {
    LT_CHECK(p.device() == s.device, "grad norm: parameter '", name, "' is on ", p.device().str(),
             ", the first on ", s.device.str());
    // A parameter listed twice would be counted twice, and its hook would
    // fire for one slot only.
    LT_CHECK(distinct.insert(p.impl()).second, "grad norm: parameter '", name, "' is listed twice");
    s.params.push_back(p);
    s.first_slot.push_back(s.slot_count);
#ifdef LT_WITH_CUDA
    s.slot_count +=
        s.device.is_cuda() ? cuda::chunk_count(p.numel()) : grad_norm_chunk_count(p.numel());
#else
    s.slot_count += grad_norm_chunk_count(p.numel());
#endif
  }
  s.seen.resize(s.params.size());
  s.reading.resize(s.params.size());
  if (s.on_cuda()) {
    s.device_slots = Tensor::empty({s.slot_count + 1}, DType::F64, s.device);
    s.side = Stream::create(s.device);
    s.host_result = static_cast<double*>(pinned_host_pool().allocate(sizeof(double)));
  } else {
    s.host_slots.assign(static_cast<size_t>(s.slot_count), 0.0);
  }
  const std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i) {
    // A frozen parameter gets no hook (and normally no gradient; finish()
    // takes one that was set by hand).
    if (!s.params[i].requires_grad() || !s.params[i].is_leaf()) continue;
    s.params[i].register_grad_ready_hook([weak, i](const Tensor& param) {
      const std::shared_ptr<State> state = weak.lock();
      if (!state || !state->armed) return;
      state->take(i, param.grad());
    });
  }
  begin();
}

GradNormPartials::~GradNormPartials() {
  State& s = *state_;
  s.armed = false;
  if (s.on_cuda()) {
    try {
      s.drain();
      if (s.finished) s.result.synchronize();
    } catch (...) {  // no throw from a destructor; the device is failing anyway
    }
    pinned_host_pool().deallocate(s.host_result, sizeof(double));
  }
}

void GradNormPartials::begin() {
  State& s = *state_;
  s.armed = false;
  // A step abandoned after arm() (an exception) may have reads in flight.
  s.drain();
  if (s.on_cuda() && s.finished) s.result.synchronize();
  s.finished = false;
  std::fill(s.seen.begin(), s.seen.end(), Tensor());
  std::fill(s.reading.begin(), s.reading.end(), Tensor());
  if (s.on_cuda()) {
#ifdef LT_WITH_CUDA
    // On the compute stream: every side-stream read this step is ordered
    // after it by the event its hook records.
    cuda::enqueue_zero(s.device, static_cast<double*>(s.device_slots.data_ptr()), s.slot_count,
                       current_stream(s.device).handle());
#endif
  } else {
    std::fill(s.host_slots.begin(), s.host_slots.end(), 0.0);
  }
}

void GradNormPartials::arm() {
  LT_CHECK(!state_->finished, "grad norm: arm() after finish(); call begin() first");
  state_->armed = true;
}

void GradNormPartials::disarm() {
  state_->armed = false;
}

void GradNormPartials::finish() {
  State& s = *state_;
  LT_CHECK(!s.finished, "grad norm: finish() twice; call begin() first");
  s.armed = false;
  for (size_t i = 0; i < s.params.size(); ++i) {
    const Tensor& grad = s.params[i].grad();
    if (!grad.defined()) {
      if (s.seen[i].defined()) s.clear(i);
    } else if (!grad.same_impl(s.seen[i])) {
      s.take(i, grad);
    }
  }
  s.finished = true;
  if (!s.on_cuda()) return;
#ifdef LT_WITH_CUDA
  const Stream compute = current_stream(s.device);
  if (s.side_pending) {
    s.joined.record(s.side);
    s.joined.wait(compute);
  }
  auto* slots = static_cast<double*>(s.device_slots.data_ptr());
  cuda::enqueue_sum_to_host(s.device, slots, s.slot_count, slots + s.slot_count, s.host_result,
                            compute.handle());
  s.result.record(compute);
#endif
}

double GradNormPartials::squared_sum() {
  State& s = *state_;
  LT_CHECK(s.finished, "grad norm: squared_sum() before finish()");
  double total = 0;
  if (s.on_cuda()) {
    s.result.synchronize();
    // The read-back came after the join, so the side stream's work is done.
    s.side_pending = false;
    total = *s.host_result;
  } else {
    for (double v : s.host_slots) total += v;
  }
  std::fill(s.seen.begin(), s.seen.end(), Tensor());
  std::fill(s.reading.begin(), s.reading.end(), Tensor());
  return total;
}

}  // namespace lt::optim
