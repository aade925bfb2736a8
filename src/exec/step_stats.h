#pragma once
// What one optimizer step did and cost. Every executor fills the same
// struct; the trainer writes it to metrics.jsonl.
#include <cstdint>
#include <map>
#include <string>

namespace lt::exec {

struct StepStats {
  double loss = 0;           // mean token loss of the step's batch, before the update
  int64_t tokens = 0;        // real (non-padding) tokens processed
  int64_t target_count = 0;  // tokens that counted in the loss
  double grad_norm = 0;      // global L2 norm before clipping
  bool skipped = false;      // non-finite loss or gradient: no update was made
  // Of a skipped step, the stages the streaming executor had updated during
  // the backward (train.clip_with_previous_norm) before it met a stage
  // whose gradient was not finite: those keep their update, that stage and
  // every later one in backward order were not updated. 0: none was.
  int64_t stages_updated_before_skip = 0;
  // Seconds, wall clock. `compute` is forward + backward; the exposed_*
  // fields are waits the executor could not hide behind compute (zero for
  // the resident executor, which does everything in order). The streaming
  // executor on a GPU times compute by events on the device, and counts a
  // wait only from when the device had run the work queued before it (Note
  // [One use queued ahead], exec/streaming.cpp): so from 2026-12-04 on its
  // waits are the device's idle time, where before they were the host's
  // whole waits.
  double seconds = 0;
  double compute_s = 0;
  double recompute_s = 0;
  double exposed_h2d_s = 0;
  double exposed_d2h_s = 0;
  double exposed_disk_s = 0;
  double optimizer_s = 0;
  // Of optimizer_s, the part the streaming executor's forward waited for
  // stages whose states live on disk (exec.state_placement): their
  // write-backs after the update, and as much of its wait for the update
  // as the update itself waited for the stage's read.
  double states_disk_s = 0;
  // The disk stages' reads and write-backs behind this step's waits: the
  // bytes they moved and the seconds the states thread took for them (file
  // I/O, checksums and the host memory it filled), so that the run shows
  // the rate it got against the profile's disk_read_gbps/disk_write_gbps.
  int64_t states_read_bytes = 0;
  int64_t states_write_bytes = 0;
  double states_read_s = 0;
  double states_write_s = 0;
  double bubbles_s = 0;
  // The streaming executor's CPU updates of the stages this step's forward
  // took (the previous step's gradients): the optimizer thread's seconds on
  // them and the parameters they updated, so that the run shows the rate it
  // got against the plan's priced one.
  double cpu_update_s = 0;
  int64_t cpu_update_parameters = 0;
  // Bytes the step copied host -> device and device -> host (the offload
  // executors count theirs; 0 where not counted).
  int64_t h2d_bytes = 0;
  int64_t d2h_bytes = 0;
  // ZenFlow: the number of steps in the window this step ended (the CPU
  // update it queued covers them); 0 when no window ended.
  int64_t zenflow_window_steps = 0;
  // Peak bytes during the step, per memory space ("host", "gpu", ...).
  std::map<std::string, int64_t> peak_bytes;
};

}  // namespace lt::exec
