#pragma once
// An independent check of a Schedule against a machine: written apart from
// the MILP (it counts bytes with exec::bytes_needed and walks the
// placements), so that every schedule the planner emits can be held to it.
#include <string>
#include <vector>

#include "exec/memory_budget.h"
#include "exec/schedule.h"
#include "models/config.h"
#include "plan/hardware.h"

namespace lt::plan {

// Every way `schedule` breaks the machine's limits or the executor's needs;
// empty when it is valid:
//   - one placement per boundary, boundaries 0 and L on the GPU;
//   - every boundary backward needs is kept or recomputable from a kept one
//     at most `max_recompute` blocks before the next kept one;
//   - bytes per space (bytes_needed) within the profile's memory and disk,
//     and kept GPU / host boundaries within its activation caps.
std::vector<std::string> schedule_problems(const models::ModelConfig& config,
                                           const exec::TrainSizes& sizes,
                                           const HardwareProfile& hardware,
                                           const exec::Schedule& schedule, int max_recompute);

}  // namespace lt::plan
