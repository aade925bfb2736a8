// The streaming executor's stages on the device (Schedule::stages_on_device).
#include <cmath>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "exec/parameter_states.h"
#include "exec/streaming_impl.h"
#include "optim/clip.h"

namespace lt::exec {

// Note [Stages on the device]
// With exact clipping every CPU update starts when the backward ends, and
// the next forward chases them (Note [Updates in pieces]): on the H200 the
// 3B's AdamW moves ~28 bytes a parameter at the host's memory bandwidth and
// takes longer than the forward it hides behind, so the forward waits. A
// GPU with room left after the planner's schedule holds some stages whole
// instead: their f32 masters, their optimizer states, their weights in the
// compute dtype (the optimizer keeps them as its bf16 shadow; on the f32
// stand-in the masters are the weights) and, from their backward to the
// step's end, their gradients. Such a stage is never uploaded, its
// gradients never go to the host, and the GPU updates it at the step's end,
// so the CPU has less to do and the forward less to wait for; the planner
// takes the first stages (the embedding, then blocks in order), which the
// forward needs first.
//  - Placement: every handle of a master's memory (the model's parameter,
//    masters[i], norm_views[i]) and every optimizer state tensor of its
//    parameters is pointed at a device copy at the first step; the host
//    memory is kept, and sync() (a checkpoint, an evaluation) and the
//    destructor copy the values back into it and point the handles there
//    again, so that between steps everything reads host tensors, as
//    without the feature. The next step places them again.
//  - Updates: on the compute thread, on the compute stream, once the norm
//    is known and before the CPU updates are queued: the optimizer thread
//    is idle then (every earlier update was waited for by this step's
//    forward, its finish_step too, below), so the optimizer is never
//    called from two threads at once, and stream order puts the update
//    after the stage's backward and before its next forward.
//  - With train.clip_with_previous_norm the update runs during the
//    backward instead, queued by the optimizer thread on the compute stream
//    in the backward's order (Impl::enqueue_update_on_device).
//  - Not with several ranks or states on disk (refused: their updates run
//    on other threads, in other orders).
void StreamingExecutor::Impl::setup_device_stages() {
  on_device = plan.on_device;
  device_params.assign(params.size(), DeviceParam{});
  bool any = false;
  for (size_t s = 0; s < stages.size(); ++s) any = any || on_device[s];
  if (!any) return;
  LT_CHECK(!options.ranks, "exec.schedule: stages_on_device is for one process so far; the ",
           "schedule of a run of several processes must leave it out");
  LT_CHECK(disk_stages.empty(), "exec.schedule: stages_on_device cannot be combined with ",
           "exec.state_placement disk (a stage's states are on the device or on disk)");
  for (size_t s = 0; s < stages.size(); ++s) {
    if (!on_device[s]) continue;
    for (size_t i : stages[s].weights) {
      const bool owned = i >= stages[s].first && i < stages[s].last;
      LT_CHECK(owned || on_device[0], "exec.schedule: stages_on_device has the head (stage ", s,
               ") but not the embed stage (0), whose embedding matrix the tied head reads; add ",
               "stage 0");
    }
  }
  const std::vector<optim::NamedTensors> states = states_by_parameter(names, optimizer.state());
  for (size_t s = 0; s < stages.size(); ++s) {
    if (!on_device[s]) continue;
    for (size_t i = stages[s].first; i < stages[s].last; ++i) {
      DeviceParam& d = device_params[i];
      d.handles = {params[i], masters[i], norm_views[i]};
      for (const auto& [name, t] : states[i]) d.handles.push_back(t);
      d.master_handles = 3;
    }
  }
}

bool StreamingExecutor::Impl::param_on_device(size_t i) const {
  return !device_params[i].handles.empty();
}

void StreamingExecutor::Impl::move_device_param(size_t i, bool to_device) {
  DeviceParam& d = device_params[i];
  if (d.placed == to_device) return;
  const bool f32_compute = device.compute_dtype() == DType::F32;
  // Each distinct tensor once: the master (its handles share one memory),
  // then each state. First every copy (which may run out of memory), then
  // the handles, so that a failure leaves this parameter where it was.
  std::vector<size_t> tensors;
  for (size_t k = 0; k < d.handles.size(); ++k)
    if (k == 0 || k >= d.master_handles) tensors.push_back(k);
  std::vector<DeviceParam::HostMemory> target;
  Tensor weight;
  if (to_device) {
    for (size_t k : tensors) {
      const Tensor& t = d.handles[k];
      Tensor copy = device.empty(t.shape(), t.dtype());
      copy.copy_(t);
      target.push_back({copy.storage(), copy.offset()});
    }
    if (!f32_compute) weight = device.empty(params[i].shape(), device.compute_dtype());
    d.host.clear();
    for (size_t k : tensors)
      d.host.push_back({d.handles[k].impl()->storage, d.handles[k].offset()});
  } else {
    for (size_t n = 0; n < tensors.size(); ++n) {
      const Tensor& t = d.handles[tensors[n]];
      Tensor::from_storage(d.host[n].storage, d.host[n].offset, t.shape(), t.strides(), t.dtype())
          .copy_(t);
    }
    target = d.host;
  }
  for (size_t n = 0; n < tensors.size(); ++n) {
    const size_t k = tensors[n];
    const size_t end = k == 0 ? d.master_handles : k + 1;
    for (size_t h = k; h < end; ++h) {
      d.handles[h].impl()->storage = target[n].storage;
      d.handles[h].impl()->offset = target[n].offset;
    }
  }
  if (to_device) {
    // The optimizer keeps the bf16 weights current, filled from the master now.
    d.weight = f32_compute ? masters[i] : weight;
    if (!f32_compute) optimizer.set_bf16_shadow(i, d.weight);
  } else {
    d.weight = Tensor();
    if (!f32_compute) optimizer.set_bf16_shadow(i, device.upload_copy_of(i));
    d.host.clear();
  }
  d.placed = to_device;
}

void StreamingExecutor::Impl::place_device_stages(bool to_device) {
  if (device_stages_placed == to_device) return;
  auto scope = device.compute_scope();
  NoGradGuard no_grad;  // the masters require grad; their copies are not part of a graph
  // Copies run on the compute stream: moving back, after the updates there.
  device.finish_compute();
  size_t i = 0;
  try {
    for (; i < params.size(); ++i)
      if (param_on_device(i)) move_device_param(i, to_device);
  } catch (const std::exception& e) {
    // Half placed (device memory ran out): what moved goes back, so that
    // every master and state is where it was before the step.
    if (to_device) {
      try {
        for (size_t j = 0; j < i; ++j)
          if (param_on_device(j)) move_device_param(j, false);
      } catch (...) {
        // The first error is the one reported.
      }
    }
    fail("streaming executor: moving the stages of stages_on_device ",
         to_device ? "into device memory" : "back into host memory", " failed at '", names[i],
         "': ", e.what(),
         to_device ? " (set exec.stages_on_device: none to stream every stage)" : "");
  }
  device_stages_placed = to_device;  // the copies were synchronous
}

void StreamingExecutor::Impl::copy_out_on_device(int stage) {
  const StageInfo& info = stages[stage];
  nn::NamedParameters own;
  for (size_t i = info.first; i < info.last; ++i) {
    device_params[i].grad = params[i].grad();
    has_grad[i] = device_params[i].grad.defined();
    own.emplace_back(names[i], params[i]);
  }
  stage_squares[stage] = optim::grad_squared_sum(own);  // one reduction, one wait
  for (size_t i = info.first; i < info.last; ++i) params[i].set_grad(Tensor());
}

void StreamingExecutor::Impl::update_device_stages(double lr, double grad_scale) {
  if (!device_stages_placed) return;
  wait_seconds(step_finished);  // the previous step's end: the optimizer is idle
  auto scope = device.compute_scope();
  for (size_t s = 0; s < stages.size(); ++s) {
    if (!on_device[s]) continue;
    const StageInfo& info = stages[s];
    // Its own track: the "compute" track holds the GPU's intervals, and
    // this is the host queueing the update (Note [One use queued ahead]).
    TraceSpan span(tracing(), "device updates",
                   "update " + model.stages()[s]->name() + " (on the device)");
    try {
      for (size_t i = info.first; i < info.last; ++i)
        if (has_grad[i]) params[i].set_grad(device_params[i].grad);
      optimizer.update(lr, grad_scale, info.first, info.last);
    } catch (...) {
      drop_device_gradients();
      update_failed("the optimizer update of stage '" + model.stages()[s]->name() +
                    "' on the device");
    }
    for (size_t i = info.first; i < info.last; ++i) {
      params[i].set_grad(Tensor());
      device_params[i].grad = Tensor();
    }
  }
}

void StreamingExecutor::Impl::drop_device_gradients() {
  for (size_t i = 0; i < params.size(); ++i) {
    if (!param_on_device(i)) continue;
    params[i].set_grad(Tensor());
    device_params[i].grad = Tensor();
  }
}

}  // namespace lt::exec
