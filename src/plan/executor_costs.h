#pragma once
// Predicted step times of the executors that keep the whole model on the
// device (resident, offload, ZenFlow), from the cost model's stage times
// (measured, or the FLOP model) and the profile's bandwidths and CPU
// optimizer rate, so that exec.mode auto can compare them with the
// streaming planner's prediction and pick the fastest that fits.
//
// The models follow what the executors do (exec/offload.h):
//  - resident: forward and backward of the batch, then the device's update
//    (the profile's gpu_adam(8bit)_gparams_per_s);
//  - offload: the same compute, then every gradient down, the CPU update,
//    and every weight up, one after the other (the synchronous step);
//  - ZenFlow: the same compute and a device update (f32 AdamW) over topk
//    of the parameters every step; per window of `update_interval` steps, the
//    gradients down and the merged weights up at once (both links), and the
//    CPU update, which runs beside the window's steps and shows only where
//    it is longer than them.
#include <cstdint>

#include "plan/cost_model.h"

namespace lt::plan {

// Seconds of the device's own update of `params` parameters with
// `optimizer`, at the profile's measured rate for it.
double device_update_seconds(const HardwareProfile& hardware, exec::OptimizerStates optimizer,
                             double params);

struct ExecutorTime {
  double compute_s = 0;    // forward + backward of the batch
  double optimizer_s = 0;  // the update the step waits for (device or CPU)
  double copies_s = 0;     // gradient and weight copies the step waits for
  double step_s = 0;
};

// `model` must be made with the run's micro-batch as its chunk.
ExecutorTime predict_resident(const CostModel& model);
ExecutorTime predict_offload(const CostModel& model);
// update_interval: steps per CPU update (auto: pass the expected window).
// `window_end_known` (a fixed update_interval, with the early download):
// the window's copies run during its last backward (Note [ZenFlow's early
// download], Note [ZenFlow's early merge]) and only what outlasts that
// backward is waited for.
ExecutorTime predict_zenflow(const CostModel& model, double topk_ratio, int64_t update_interval,
                             bool window_end_known = false);

}  // namespace lt::plan
