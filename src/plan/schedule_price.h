#pragma once
// What a schedule the planner did not choose costs: a named all_gpu or
// every_k, or a schedule file. make_plan predicts its own; this prices any
// other with the same cost model, so that every streaming run on a GPU has
// a predicted step to hold the measured one to.
#include <string>

#include "exec/memory_budget.h"
#include "exec/schedule.h"
#include "models/config.h"
#include "plan/cost_model.h"
#include "plan/hardware.h"

namespace lt::plan {

struct SchedulePrice {
  StepPrediction prediction;
  std::string stage_times_from;  // CostModel::stage_times_from: measured or the FLOP model
};

// `schedule` (validated for `config`) at `sizes`, its chunk (the whole
// batch when it names none), stages on the device and fused tail, on
// `hardware`'s links, rates and stage times; `updates_during_backward` as
// train.clip_with_previous_norm. Its placements are fixed (price_placements):
// the recompute is its own, and its offloaded boundaries' copies are spread
// over the windows as well as the links allow, as the planner's are. The
// memory it needs is not checked here (the run's budget check does that).
SchedulePrice price_schedule(const models::ModelConfig& config, const HardwareProfile& hardware,
                             const exec::TrainSizes& sizes, const exec::Schedule& schedule,
                             bool updates_during_backward, double time_limit_s = 10);

}  // namespace lt::plan
