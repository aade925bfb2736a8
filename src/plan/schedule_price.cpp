#include "plan/schedule_price.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "plan/milp.h"

namespace lt::plan {

SchedulePrice price_schedule(const models::ModelConfig& config, const HardwareProfile& hardware,
                             const exec::TrainSizes& sizes, const exec::Schedule& schedule,
                             bool updates_during_backward, double time_limit_s) {
  const int L = static_cast<int>(config.num_hidden_layers);
  // The cost model keeps boundaries 0 and L on the GPU. Boundary L is, in
  // the executor, whatever a schedule says (the head step takes it straight
  // from the last forward; every_k with L % k != 0 names it recomputed); a
  // recomputed boundary 0 is the embedding's lookup again, ~free. Boundary 0
  // on the host or the disk moves bytes the cost model has no term for.
  std::vector<exec::Placement> placements = schedule.boundaries;
  LT_CHECK(placements.front() == exec::Placement::Gpu ||
               placements.front() == exec::Placement::Recompute,
           "plan: the cost model prices boundary 0 on the GPU or recomputed, not on the ",
           exec::placement_name(placements.front()));
  placements.front() = placements.back() = exec::Placement::Gpu;
  // The longest run of recomputed blocks between two kept boundaries: the
  // MILP's recompute edges must reach it.
  int longest = 1, last_kept = 0;
  for (int i = 1; i <= L; ++i) {
    if (placements[static_cast<size_t>(i)] == exec::Placement::Recompute) continue;
    longest = std::max(longest, i - last_kept);
    last_kept = i;
  }
  const int64_t chunk = schedule.chunk_sequences > 0 ? schedule.chunk_sequences : sizes.batch_size;
  CostModel m = make_cost_model(config, hardware, sizes, chunk, longest);
  m.updates_during_backward = updates_during_backward;
  const PlanInstance instance = build_instance(m);
  const PlanSolution solution = price_placements(instance, placements, time_limit_s);
  LT_CHECK(solution.feasible, "plan: the cost model found no way to run the schedule's placements",
           solution.proven_infeasible ? "" : " within the time limit");
  m.stages_on_device = schedule.on_device(L);
  m.tail_blocks = schedule.tail_blocks;
  use_tail_chunk(m, schedule.tail_chunk_sequences);
  return {predict_step(m, instance, solution), m.stage_times_from};
}

}  // namespace lt::plan
