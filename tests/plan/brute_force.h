#pragma once
// Brute force over every placement of a small PlanInstance, written apart
// from the MILP: it walks placements, not edges, and prices offload traffic
// with the closed-form max flow of nested windows instead of an LP.
#include <vector>

#include "exec/schedule.h"
#include "plan/instance.h"

namespace lt::testing {

struct BruteForceResult {
  bool feasible = false;
  double objective = 0;
  std::vector<exec::Placement> placements;
};

// The cost of one placement (recompute + activation exposure + tie-breakers),
// or a negative number when it breaks a capacity or the recompute length.
double placement_cost(const plan::PlanInstance& in, const std::vector<exec::Placement>& p);

BruteForceResult brute_force(const plan::PlanInstance& in);

}  // namespace lt::testing
