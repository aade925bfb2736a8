// The MILP against brute force over every placement of small instances
// (L <= 10): the same optimum, and the solver's placement costs what it says.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "plan/brute_force.h"
#include "plan/milp.h"

namespace lt::plan {
namespace {

PlanInstance random_instance(std::mt19937& rng, int L) {
  std::uniform_real_distribution<double> u(0, 1);
  PlanInstance in;
  in.num_blocks = L;
  double total = 0;
  for (int i = 0; i <= L; ++i) {
    in.boundary_gb.push_back(0.5 + u(rng));
    total += in.boundary_gb.back();
  }
  for (int j = 0; j < L; ++j) in.forward_s.push_back(0.01 + 0.04 * u(rng));
  in.max_recompute = 1 + static_cast<int>(u(rng) * 4);
  // Tight spaces, so that recompute, offload and exposure all compete.
  in.gpu_gb = 3.2 + u(rng) * 0.4 * total;
  if (u(rng) < 0.3) in.gpu_kept_gb = 3.2 + u(rng) * 0.3 * total;
  in.host_gb = u(rng) * 0.4 * total;
  in.disk_gb = u(rng) * 0.4 * total;
  const double gbps[] = {10, 2, 10, 3};
  for (int li = 0; li < kNumLinks; ++li) {
    auto& l = in.links[li];
    l.gbps = gbps[li];
    for (int w = 0; w <= L; ++w) {
      l.capacity_gb.push_back(u(rng) * 1.2);
      l.mandatory_gb.push_back(static_cast<Link>(li) == Link::HostToDevice ? u(rng) * 0.8 : 0.0);
    }
  }
  return in;
}

class MilpAgainstBruteForce : public ::testing::TestWithParam<int> {};

TEST_P(MilpAgainstBruteForce, SameOptimumOnRandomInstances) {
  if (!have_milp_solver()) GTEST_SKIP() << "built without CBC";
  const int L = GetParam();
  std::mt19937 rng(1234 + L);
  const int instances = L <= 6 ? 25 : (L <= 8 ? 8 : 3);
  int feasible = 0, kinds[4] = {0, 0, 0, 0}, exposed = 0;
  for (int k = 0; k < instances; ++k) {
    const PlanInstance in = random_instance(rng, L);
    const auto bf = testing::brute_force(in);
    const PlanSolution milp = solve_milp(in, 30);
    SCOPED_TRACE("L=" + std::to_string(L) + " instance " + std::to_string(k));
    ASSERT_EQ(milp.feasible, bf.feasible);
    if (!bf.feasible) {
      EXPECT_TRUE(milp.proven_infeasible);
      continue;
    }
    ++feasible;
    for (auto p : bf.placements) ++kinds[static_cast<int>(p)];
    double exposure = 0;
    for (double e : milp.exposed_s) exposure += e;
    exposed += exposure > 1e-9;
    EXPECT_TRUE(milp.proven_optimal);
    EXPECT_NEAR(milp.objective, bf.objective, 1e-6 + 1e-6 * bf.objective);
    // The placement the solver returns is feasible and costs its objective.
    const double cost = testing::placement_cost(in, milp.placements);
    ASSERT_GE(cost, 0) << "the solver's placement breaks a constraint";
    EXPECT_NEAR(cost, bf.objective, 1e-6 + 1e-6 * bf.objective);
  }
  EXPECT_GT(feasible, 0);
  // The instances are meant to make every choice matter somewhere.
  if (L >= 5 && instances >= 8) {
    for (int k = 0; k < 4; ++k) EXPECT_GT(kinds[k], 0) << exec::placement_name(exec::Placement(k));
    EXPECT_GT(exposed, 0) << "no optimum exposed any offload traffic";
  }
}

INSTANTIATE_TEST_SUITE_P(Blocks, MilpAgainstBruteForce, ::testing::Values(2, 3, 4, 5, 6, 8, 10));

TEST(Milp, RecomputesWhenNothingElseFits) {
  if (!have_milp_solver()) GTEST_SKIP() << "built without CBC";
  // Six blocks of 1 GB boundaries, GPU only, runs of at most 3 blocks, 5 GB
  // on the GPU. Keeping {0, 3, 6} needs 3 GB + a 2 GB recompute buffer and
  // recomputes 4 block forwards; keeping {0, 2, 4, 6} needs 4 GB + 1 GB and
  // recomputes 3: the cheaper one. Keeping more needs more than 5 GB.
  PlanInstance in;
  in.num_blocks = 6;
  in.boundary_gb.assign(7, 1.0);
  in.forward_s.assign(6, 0.1);
  in.max_recompute = 3;
  in.gpu_gb = 5;
  in.host_gb = in.disk_gb = 0;
  for (auto& l : in.links) {
    l.capacity_gb.assign(7, 10.0);
    l.mandatory_gb.assign(7, 0.0);
  }
  const PlanSolution s = solve_milp(in, 10);
  ASSERT_TRUE(s.feasible);
  using exec::Placement;
  const std::vector<Placement> expected = {
      Placement::Gpu, Placement::Recompute, Placement::Gpu, Placement::Recompute,
      Placement::Gpu, Placement::Recompute, Placement::Gpu};
  EXPECT_EQ(s.placements, expected);
  EXPECT_NEAR(s.recompute_s, 0.3, 1e-9);
  in.gpu_gb = 4;  // both arrangements need 5 GB
  EXPECT_FALSE(solve_milp(in, 10).feasible);
}

TEST(Milp, SplitsADiskReadAsItsTrafficSpreads) {
  if (!have_milp_solver()) GTEST_SKIP() << "built without CBC";
  // Three blocks, boundaries of 1, 3, 1, 1 GB, no recompute (runs of 1).
  // The GPU holds 3 GB: boundaries 0, 2 and 3; boundary 1 (3 GB) goes to
  // disk, the only other room. Its read may use backward windows 3 and 2
  // (its edge ends at 2), which leave 1 GB and 2 GB for activations: any
  // other spread exposes bytes, so the optimum reads 1/3 in window 3 and
  // 2/3 in window 2, and starts in window 3.
  PlanInstance in;
  in.num_blocks = 3;
  in.boundary_gb = {1, 3, 1, 1};
  in.forward_s.assign(3, 0.1);
  in.max_recompute = 1;
  in.gpu_gb = 3;
  in.host_gb = 0;
  in.disk_gb = 3;
  for (auto& l : in.links) {
    l.capacity_gb.assign(4, 10.0);
    l.mandatory_gb.assign(4, 0.0);
  }
  in.link(Link::DiskRead).capacity_gb = {0, 0, 2, 1};
  const PlanSolution s = solve_milp(in, 10);
  ASSERT_TRUE(s.feasible);
  using exec::Placement;
  EXPECT_EQ(s.placements, (std::vector<Placement>{Placement::Gpu, Placement::Disk, Placement::Gpu,
                                                  Placement::Gpu}));
  EXPECT_NEAR(s.exposed_s[static_cast<int>(Link::DiskRead)], 0, 1e-9);
  EXPECT_EQ(s.read_windows[1], 3);
  ASSERT_EQ(s.read_splits.size(), 4u);
  ASSERT_EQ(s.read_splits[1].size(), 2u);
  EXPECT_EQ(s.read_splits[1][0].window, 3);
  EXPECT_NEAR(s.read_splits[1][0].fraction, 1.0 / 3, 1e-6);
  EXPECT_EQ(s.read_splits[1][1].window, 2);
  EXPECT_NEAR(s.read_splits[1][1].fraction, 2.0 / 3, 1e-6);
  for (int i : {0, 2, 3}) EXPECT_TRUE(s.read_splits[i].empty()) << i;
}

// milp_columns counts what solve_milp builds: each kind of column counted
// one at a time as milp.h defines it, and the builder's own count for 300
// blocks in runs of up to 8 (184478, printed from the builder once).
TEST(Milp, CountsTheColumnsOfItsInstance) {
  for (int L : {1, 2, 5, 9, 40}) {
    for (int k : {1, 3, 8, 50}) {
      int64_t columns = 0;
      for (int s = 0; s < L; ++s)
        for (int e = s + 1; e <= L && e - s <= k; ++e) ++columns;  // x(s, e)
      columns += 3 * (L + 1) + 1;                                  // g, c, n(i) and y
      columns += kNumLinks * (L + 1);                              // D(l, w)
      for (int i = 1; i < L; ++i) {
        columns += 2 * (L - i + 1);  // d, q(i, w): forward windows i..L
        columns += 2 * (L - i);      // h, r(i, w): backward windows i+1..L
      }
      EXPECT_EQ(milp_columns(L, k), columns) << L << " blocks, runs of up to " << k;
    }
  }
  EXPECT_EQ(milp_columns(300, 8), 184478);
}

// Note [The instance within the time limit] (milp.cpp): 1000 blocks make 2
// million columns, a second or more to build on the dev VM and tens of
// seconds of CBC's setup after it; the builder stops at the limit and says
// so, and nothing is handed to CBC.
TEST(Milp, StopsBuildingAHugeInstanceAtTheTimeLimit) {
  if (!have_milp_solver()) GTEST_SKIP() << "built without CBC";
  const int L = 1000;
  PlanInstance in;
  in.num_blocks = L;
  in.boundary_gb.assign(L + 1, 1.0);
  in.forward_s.assign(L, 0.1);
  in.gpu_gb = 2 * L;  // every boundary fits
  for (auto& l : in.links) {
    l.capacity_gb.assign(L + 1, 10.0);
    l.mandatory_gb.assign(L + 1, 0.0);
  }
  const double limit_s = 0.05;
  const auto start = std::chrono::steady_clock::now();
  const PlanSolution s = solve_milp(in, limit_s);
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(s.out_of_time_building);
  EXPECT_FALSE(s.feasible);
  EXPECT_FALSE(s.proven_infeasible);
  EXPECT_GE(s.solve_s, limit_s);
  // The clock is read per boundary, each a few thousand columns.
  EXPECT_LT(took_s, limit_s + 1) << "the build ran on past the limit";
}

}  // namespace
}  // namespace lt::plan
