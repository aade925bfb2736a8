// price_schedule against the planner's own predictions (a schedule it
// chose, priced again, costs what it predicted) and against the recompute
// worked out by hand for schedules it did not choose.
#include "plan/schedule_price.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plan/milp.h"
#include "plan/planner.h"
#include "plan/tiny_model.h"
#include "support/errors.h"

namespace lt::plan {
namespace {

using exec::Placement;

using testing::small_llama;
using testing::small_machine;

// Whatever the planner chose (boundaries on the GPU, the host and the disk,
// recomputed runs, stages on the device, a fused tail), pricing its
// schedule gives its prediction: the placements fixed, the MILP spreads
// the copies as the planner's solve did.
TEST(SchedulePrice, APlannedScheduleCostsWhatThePlannerPredicted) {
  if (!have_milp_solver()) GTEST_SKIP() << "built without CBC";
  const auto config = small_llama(12);
  int offloaded = 0, recomputed = 0, tails = 0, stages = 0;
  for (double gpu : {1.0, 1.3, 8.0})
    for (double host : {1.2, 1.6})
      for (double disk_gbps : {0.2}) {
        SCOPED_TRACE(::testing::Message()
                     << "gpu " << gpu << " host " << host << " disk " << disk_gbps);
        const HardwareProfile hw = small_machine(gpu, host, disk_gbps);
        PlanOptions o = testing::options_for_batch(64, 10);
        o.max_recompute = 3;
        const Plan p = make_plan(config, hw, o);
        if (!p.feasible) continue;
        const SchedulePrice got = price_schedule(config, hw, p.sizes, p.schedule, false);
        if (p.solution.proven_optimal)
          EXPECT_NEAR(got.prediction.step_s, p.prediction.step_s, 1e-9 * p.prediction.step_s);
        else  // an incumbent at the time limit: the spread found now is no worse
          EXPECT_LE(got.prediction.step_s, p.prediction.step_s * (1 + 1e-9));
        EXPECT_NEAR(got.prediction.recompute_s, p.prediction.recompute_s, 1e-12);
        EXPECT_EQ(got.stage_times_from, p.stage_times_from);
        for (Placement b : p.schedule.boundaries) {
          offloaded += b == Placement::Host || b == Placement::Disk;
          recomputed += b == Placement::Recompute;
        }
        tails += p.schedule.tail_blocks > 0;
        stages += !p.schedule.stages_on_device.empty();
      }
  // The grid reaches every kind of choice the price must follow.
  EXPECT_GT(offloaded, 0);
  EXPECT_GT(recomputed, 0);
  EXPECT_GT(tails, 0);
  EXPECT_GT(stages, 0);
}

// every_k keeps boundary i when i % k == 0; each boundary between two kept
// ones is recomputed once in the backward, at one block's forward: the
// recompute is their count times the block's forward time, however long
// the runs (longer than the planner's max_recompute of 8 here).
TEST(SchedulePrice, ARecomputedBoundaryCostsOneBlockForward) {
  if (!have_milp_solver()) GTEST_SKIP() << "built without CBC";
  const auto config = small_llama(12);
  const HardwareProfile hw = small_machine(8, 8, 3);
  exec::TrainSizes sizes{64, 1024, exec::OptimizerStates::Fp32, 2};
  const double rho = make_cost_model(config, hw, sizes, 8, 8).block_forward_s;
  for (int k : {1, 2, 3, 5, 12}) {
    SCOPED_TRACE(k);
    exec::Schedule s = exec::Schedule::every_kth_gpu(12, k);
    s.chunk_sequences = 8;
    int recomputed = 0;  // boundary 12 feeds the head straight from the forward
    for (int i = 1; i < 12; ++i) recomputed += s.boundaries[i] == Placement::Recompute;
    const SchedulePrice got = price_schedule(config, hw, sizes, s, false);
    EXPECT_NEAR(got.prediction.recompute_s, recomputed * rho, 1e-12 * (1 + recomputed * rho));
    EXPECT_EQ(got.prediction.exposed_activations_s, 0);
  }
}

// Boundary 0 recomputed is the embedding's lookup again and is priced as
// kept; on the host it moves bytes the cost model has no term for, and the
// price says so rather than leave them out.
TEST(SchedulePrice, ABoundaryZeroOffTheGpuIsNotPricedAsKept) {
  if (!have_milp_solver()) GTEST_SKIP() << "built without CBC";
  const auto config = small_llama(4);
  const HardwareProfile hw = small_machine(8, 8, 3);
  exec::TrainSizes sizes{64, 1024, exec::OptimizerStates::Fp32, 2};
  exec::Schedule s = exec::Schedule::all_gpu(4);
  s.chunk_sequences = 8;
  const double kept = price_schedule(config, hw, sizes, s, false).prediction.step_s;
  s.boundaries[0] = Placement::Recompute;
  EXPECT_EQ(price_schedule(config, hw, sizes, s, false).prediction.step_s, kept);
  s.boundaries[0] = Placement::Host;
  EXPECT_THAT(lt::testing::error_of([&] { price_schedule(config, hw, sizes, s, false); }),
              ::testing::HasSubstr("boundary 0 on the GPU or recomputed, not on the host"));
}

}  // namespace
}  // namespace lt::plan
