#pragma once
// exec.mode auto among the executors that hold the whole model on the
// device (resident, ZenFlow, offload): whether each fits the device, and
// its predicted step (plan/executor_costs.h), as one table that `train`
// prints and `lazytrain plan` shows. resolve_run compares the fastest that
// fits with the streaming planner's prediction when it runs the planner.
#include <string>
#include <vector>

#include "core/device.h"
#include "exec/executor.h"
#include "models/config.h"
#include "train/config.h"
#include "train/executor_choice.h"

namespace lt::train {

struct ExecutorCandidate {
  exec::ExecutorKind executor = exec::ExecutorKind::Resident;
  bool fits = false;
  // Whether auto may take it when it fits: ZenFlow's updates are AdamW's
  // selective approximation, taken only where resident does not fit.
  bool eligible = true;
  int64_t gpu_bytes = 0;  // its device bytes (with the resident margin for resident)
  double step_s = 0;      // predicted
  std::string detail;     // how the prediction splits
};

// Resident, ZenFlow (the config's exec.zenflow, update_interval auto taken
// as 4) and offload for this run, against `choice`'s available bytes (no
// limit: all fit).
std::vector<ExecutorCandidate> whole_model_candidates(const TrainConfig& c,
                                                      const models::ModelConfig& model,
                                                      Device device, const ExecutorChoice& choice);

// The fastest eligible candidate that fits (the earlier on a tie), or null.
const ExecutorCandidate* fastest_fitting(const std::vector<ExecutorCandidate>& candidates);

// One line per candidate (and the streaming plan's, when step_s > 0);
// `on_the_cpu`: the run is on the CPU stand-in, priced as the profile's GPU.
std::vector<std::string> candidate_table(const std::vector<ExecutorCandidate>& candidates,
                                         double streaming_step_s, bool on_the_cpu);

}  // namespace lt::train
