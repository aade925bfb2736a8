#pragma once
// GPU time per op class, for the benchmark's profile table: with the
// environment variable LT_OP_PROFILE=1, an OpProfileScope records a timing
// event pair on its device's current stream around the work it encloses,
// and take_op_profile() sums the elapsed times per class. Off (the
// default), a scope costs one branch. Only the outermost scope on a thread
// counts, so an op built from other ops (the lm_head loss from GEMMs and
// the cross-entropy; a backward node from raw ops) is charged once, to its
// own class. Host-only work (CPU tensors) is not timed.
//
// The elapsed time between the two events is the device's wall time over
// the enclosed kernels; when the host falls behind the device it includes
// the device's idle gaps, which is part of what the profile should show.
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"

namespace lt::ops {

bool op_profile_enabled();

class OpProfileScope {
 public:
  // `on_last_gpu`: a scope given a CPU device is timed on the last GPU a
  // timed scope used (a backward node whose incoming gradient is the loss's
  // host seed while its work runs on the GPU).
  OpProfileScope(const char* op_class, Device device, bool on_last_gpu = false);
  ~OpProfileScope();
  OpProfileScope(const OpProfileScope&) = delete;
  OpProfileScope& operator=(const OpProfileScope&) = delete;

 private:
  int slot_ = -1;  // index of this scope's record, -1 when not timed
  Device device_;
};

// Milliseconds per class since the last call, summed over all timed
// scopes, in order of first appearance; waits for the recorded events.
std::vector<std::pair<std::string, double>> take_op_profile();

}  // namespace lt::ops
