#pragma once
// The LazyTrain MILP over a PlanInstance, solved with COIN-OR CBC under a
// time limit; the incumbent at the limit is accepted.
//
// Variables (named as in the LazyTrain paper; docs/design.md, "The planner"):
//   x(s,e)   binary, a recompute edge, 0 <= s < e <= L, e - s <= max_recompute;
//   g,c,n(i) binary, boundary i kept on GPU / host / disk; z(i) = g+c+n;
//   y        the recompute buffer (GB): y >= inside_gb(s,e) * x(s,e);
//   d,q(i,w) device->host and disk-write bytes of boundary i in forward window w;
//   h,r(i,w) host->device and disk-read bytes in backward window w, allowed
//            only once its edge has ended: h(i,w) <= A_i * sum_{e<=w} x(i,e);
//   D(l,w)   bytes of link l in window w beyond what the window leaves.
// Constraints: one edge leaves 0 and one enters L, interior in-flow =
// out-flow = z(i) <= 1, g(0) = g(L) = 1; capacities per space; each kept
// offloaded boundary's bytes are all spread (sum_w d(i,w) = A_i (c+n), ...);
// per window sum_i traffic - D(l,w) <= slack.
// Objective: sum R x + sum D(l,w) / gbps(l) + tie-breakers per kept,
// offloaded (c + n) and disk boundary.
#include <array>
#include <cstdint>
#include <vector>

#include "exec/schedule.h"
#include "plan/instance.h"

namespace lt::plan {

struct PlanSolution {
  bool feasible = false;
  bool proven_optimal = false;
  bool proven_infeasible = false;  // no placement meets the constraints at all
  // The time limit ran out while the instance was built: nothing was solved.
  bool out_of_time_building = false;
  std::vector<exec::Placement> placements;    // L + 1
  double objective = 0;                       // as the solver reports it
  double recompute_s = 0;                     // sum R x
  std::array<double, kNumLinks> exposed_s{};  // exposure the activations add, per link
  // The same per compute window 0..L (seconds), per link.
  std::array<std::vector<double>, kNumLinks> window_exposed_s;
  // Per boundary 0..L: the backward window in which its read back starts
  // (Schedule::read_windows): the highest-numbered, so earliest, window
  // with bytes of it on disk_read (disk boundaries) or h2d (host ones);
  // -1 for boundaries not offloaded.
  std::vector<int> read_windows;
  // Per boundary 0..L: how its disk_read traffic spreads over windows
  // (Schedule::read_splits), earliest window first, as fractions of its
  // bytes; empty for boundaries not on disk.
  std::vector<std::vector<exec::Schedule::ReadPiece>> read_splits;
  double bound = 0;  // best lower bound on the objective
  double solve_s = 0;
};

// True when this build has CBC (otherwise solve_milp throws).
bool have_milp_solver();

// The limit covers building the instance as well as solving it (Note [The
// instance within the time limit], milp.cpp).
PlanSolution solve_milp(const PlanInstance& instance, double time_limit_s);

// The columns (variables) of solve_milp's instance for `num_blocks` blocks
// and recompute runs of up to `max_recompute`: about 2 num_blocks^2 traffic
// columns and a few per block.
int64_t milp_columns(int64_t num_blocks, int max_recompute);
// Seconds CBC spends per column of an instance before it first reads its
// clock (Note [The instance within the time limit], milp.cpp): on the dev
// VM, with a limit of 1 ms, 10-22 us a column from 47 thousand columns (150
// blocks) to 2 million (1000 blocks), the least taken.
inline constexpr double kCbcSetupSecondsPerColumn = 1e-5;

// The same MILP with every boundary's placement fixed to `placements` (L +
// 1 of them) and no capacity: what a schedule the planner did not choose
// costs (its recompute, and its offloaded boundaries' traffic spread over
// the windows as well as the links allow). `instance.max_recompute` must
// cover its longest recomputed run.
PlanSolution price_placements(const PlanInstance& instance,
                              const std::vector<exec::Placement>& placements, double time_limit_s);

}  // namespace lt::plan
