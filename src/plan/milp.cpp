#include "plan/milp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "core/error.h"

#ifdef LT_HAVE_CBC
#include <Cbc_C_Interface.h>
#endif

namespace lt::plan {

namespace {

// Rows and columns of a MILP, gathered as triplets and handed to CBC in
// compressed-column form.
struct MilpBuilder {
  std::vector<double> col_lb, col_ub, obj;
  std::vector<bool> integer;
  std::vector<double> row_lb, row_ub;
  std::vector<std::vector<std::pair<int, double>>> columns;  // per column: (row, value)

  int add_col(double lb, double ub, double cost, bool is_integer) {
    col_lb.push_back(lb);
    col_ub.push_back(ub);
    obj.push_back(cost);
    integer.push_back(is_integer);
    columns.emplace_back();
    return static_cast<int>(obj.size()) - 1;
  }
  int add_row(double lb, double ub) {
    row_lb.push_back(lb);
    row_ub.push_back(ub);
    return static_cast<int>(row_lb.size()) - 1;
  }
  void set(int row, int col, double value) { columns[col].emplace_back(row, value); }
};

constexpr double kInf = 1e30;

bool is_forward(Link l) {
  return l == Link::DeviceToHost || l == Link::DiskWrite;
}
bool is_disk(Link l) {
  return l == Link::DiskWrite || l == Link::DiskRead;
}

// One boundary's read-back traffic (column per window, -1 where none) as
// fractions of its total, earliest (highest) window first; windows carrying
// no more than `negligible` are left out (solver noise).
std::vector<exec::Schedule::ReadPiece> read_split(const std::vector<int>& cols, const double* x,
                                                  double negligible) {
  std::vector<exec::Schedule::ReadPiece> split;
  double total = 0;
  for (int w = static_cast<int>(cols.size()) - 1; w >= 0; --w) {
    if (cols[w] < 0 || x[cols[w]] <= negligible) continue;
    split.push_back({w, x[cols[w]]});
    total += x[cols[w]];
  }
  for (auto& piece : split) piece.fraction /= total;
  return split;
}

}  // namespace

bool have_milp_solver() {
#ifdef LT_HAVE_CBC
  return true;
#else
  return false;
#endif
}

int64_t milp_columns(int64_t num_blocks, int max_recompute) {
  const int64_t L = num_blocks;
  int64_t edges = 0;  // x(s, e)
  for (int64_t e_minus_s = 1; e_minus_s <= std::min<int64_t>(L, max_recompute); ++e_minus_s)
    edges += L - e_minus_s + 1;
  const int64_t placements = 3 * (L + 1) + 1;  // g, c, n per boundary, and y
  const int64_t excess = kNumLinks * (L + 1);  // D(l, w)
  // Boundary i's traffic columns: windows i..L forward, i+1..L backward,
  // for the interior boundaries 1..L-1.
  const int64_t forward = L * (L + 1) / 2 - 1, backward = L * (L - 1) / 2;
  return edges + placements + excess + 2 * forward + 2 * backward;
}

// Note [The instance within the time limit]
// The MILP's traffic columns grow with the square of the blocks: a model of
// 1000 blocks has 2 million columns, 800 times those of a 32-block one.
// `--time-limit` is what a user expects the planning to take, so nothing
// of an instance may run unbounded past it:
//   - CBC reads its clock only once it has set the instance up and solved
//     its root LP, and that takes time in proportion to the columns
//     (kCbcSetupSecondsPerColumn): the planner does not plan a model whose
//     instance CBC could not set up within the limit (make_plan), whatever
//     its batch, nor make its cost model: exec::fixed_bytes lists the
//     boundaries each stage use holds, also the square of the blocks.
//   - Building the instance is timed with the solve: the builder reads the
//     clock per boundary and stops at the limit (out_of_time_building),
//     and CBC gets what is left.
// Either way the planner reports no placement, as for a solve that found
// none within its limit, naming the blocks and the limit.

namespace {

// solve_milp's instance; with `fixed` (L + 1 placements) each boundary's
// placement columns are fixed to it.
PlanSolution solve(const PlanInstance& in, double time_limit_s,
                   const std::vector<exec::Placement>& fixed) {
  in.check();
#ifndef LT_HAVE_CBC
  (void)time_limit_s;
  (void)fixed;
  fail("lazytrain was built without COIN-OR CBC (coinor-libcbc-dev): the planner cannot solve");
#else
  const auto started = std::chrono::steady_clock::now();
  const auto seconds_since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  const auto out_of_time_building = [&] {
    PlanSolution unsolved;
    unsolved.out_of_time_building = true;
    unsolved.solve_s = seconds_since_start();
    return unsolved;
  };
  const int L = in.num_blocks;
  const auto& A = in.boundary_gb;
  MilpBuilder m;

  struct Edge {
    int s, e, col;
  };
  // Ordered by start, then end: the edges out of s are edges[first_edge[s]
  // .. first_edge[s + 1]).
  std::vector<Edge> edges;
  std::vector<size_t> first_edge;
  for (int s = 0; s < L; ++s) {
    first_edge.push_back(edges.size());
    for (int e = s + 1; e <= std::min(L, s + in.max_recompute); ++e)
      edges.push_back({s, e, m.add_col(0, 1, in.recompute_s(s, e), true)});
  }
  first_edge.push_back(edges.size());

  std::vector<int> g(L + 1), c(L + 1), n(L + 1);
  for (int i = 0; i <= L; ++i) {
    const bool end = i == 0 || i == L;
    g[i] = m.add_col(end ? 1 : 0, 1, in.keep_penalty_s, true);
    c[i] = m.add_col(0, end ? 0 : 1, in.keep_penalty_s + in.offload_penalty_s, true);
    n[i] = m.add_col(0, end ? 0 : 1, in.keep_penalty_s + in.offload_penalty_s + in.disk_penalty_s,
                     true);
    if (fixed.empty()) continue;
    const exec::Placement p = fixed[static_cast<size_t>(i)];
    for (auto [col, at] : {std::pair{g[i], exec::Placement::Gpu},
                           {c[i], exec::Placement::Host},
                           {n[i], exec::Placement::Disk}})
      m.col_lb[col] = m.col_ub[col] = p == at ? 1 : 0;
  }
  const int y = m.add_col(0, kInf, 0, false);

  // Path flow.
  const int out0 = m.add_row(1, 1), inL = m.add_row(1, 1);
  std::vector<int> in_row(L + 1, -1), out_row(L + 1, -1);
  for (int i = 1; i < L; ++i) {
    in_row[i] = m.add_row(0, 0);
    out_row[i] = m.add_row(0, 0);
    const int one = m.add_row(-kInf, 1);
    for (int col : {g[i], c[i], n[i]}) {
      m.set(in_row[i], col, -1);
      m.set(out_row[i], col, -1);
      m.set(one, col, 1);
    }
  }
  for (const Edge& ed : edges) {
    if (ed.s == 0) m.set(out0, ed.col, 1);
    if (ed.e == L) m.set(inL, ed.col, 1);
    if (ed.s > 0) m.set(out_row[ed.s], ed.col, 1);
    if (ed.e < L) m.set(in_row[ed.e], ed.col, 1);
    if (ed.e - ed.s >= 2) {  // y >= inside * x
      const int row = m.add_row(-kInf, 0);
      m.set(row, ed.col, in.inside_gb(ed.s, ed.e));
      m.set(row, y, -1);
    }
  }

  // Capacities.
  const int gpu = m.add_row(-kInf, in.gpu_gb);
  m.set(gpu, y, 1);
  const int gpu_kept = std::isfinite(in.gpu_kept_gb) ? m.add_row(-kInf, in.gpu_kept_gb) : -1;
  const int host = m.add_row(-kInf, in.host_gb), disk = m.add_row(-kInf, in.disk_gb);
  for (int i = 0; i <= L; ++i) {
    m.set(gpu, g[i], A[i]);
    if (gpu_kept >= 0) m.set(gpu_kept, g[i], A[i]);
    m.set(host, c[i], A[i]);
    m.set(disk, n[i], A[i]);
  }

  // Traffic, per link: each offloaded boundary's bytes spread over windows.
  std::array<std::vector<int>, kNumLinks> excess;
  // The read-back columns of boundary i in window w: traffic[link][i][w], -1 where none.
  std::array<std::vector<std::vector<int>>, kNumLinks> traffic;
  for (int li = 0; li < kNumLinks; ++li) {
    const Link link = static_cast<Link>(li);
    const LinkWindows& lw = in.links[li];
    std::vector<int> window_row(L + 1);
    for (int w = 0; w <= L; ++w) {
      window_row[w] = m.add_row(-kInf, lw.slack_gb(w));
      excess[li].push_back(m.add_col(0, kInf, 1.0 / lw.gbps, false));
      m.set(window_row[w], excess[li][w], -1);
    }
    traffic[li].resize(L + 1);
    for (int i = 1; i < L; ++i) {
      // Note [The instance within the time limit]: a deep model's traffic
      // columns grow with the square of its blocks; building them counts
      // against the limit as the solve does.
      if (seconds_since_start() >= time_limit_s) return out_of_time_building();
      traffic[li][i].assign(L + 1, -1);
      const int spread = m.add_row(0, 0);
      m.set(spread, n[i], -A[i]);
      if (!is_disk(link)) m.set(spread, c[i], -A[i]);
      const int first = is_forward(link) ? i : i + 1;
      for (int w = first; w <= L; ++w) {
        const int t = m.add_col(0, kInf, 0, false);
        traffic[li][i][w] = t;
        m.set(spread, t, 1);
        m.set(window_row[w], t, 1);
        if (!is_forward(link)) {  // only once the edge out of i has ended
          const int row = m.add_row(-kInf, 0);
          m.set(row, t, 1);
          for (size_t k = first_edge[i]; k < first_edge[i + 1] && edges[k].e <= w; ++k)
            m.set(row, edges[k].col, -A[i]);
        }
      }
    }
  }

  // Compressed columns.
  std::vector<CoinBigIndex> start{0};
  std::vector<int> index;
  std::vector<double> value;
  for (const auto& col : m.columns) {
    for (const auto& [row, v] : col) {
      index.push_back(row);
      value.push_back(v);
    }
    start.push_back(static_cast<CoinBigIndex>(index.size()));
  }
  // Objective in units of the mean block forward time, so that the
  // tie-breakers and the solver's tolerances keep their meaning for tiny
  // and huge models alike.
  double unit = 0;
  for (double f : in.forward_s) unit += f / L;
  if (!(unit > 0)) unit = 1;
  for (double& cost : m.obj) cost /= unit;
  if (seconds_since_start() >= time_limit_s) return out_of_time_building();
  Cbc_Model* model = Cbc_newModel();
  Cbc_loadProblem(model, static_cast<int>(m.obj.size()), static_cast<int>(m.row_lb.size()),
                  start.data(), index.data(), value.data(), m.col_lb.data(), m.col_ub.data(),
                  m.obj.data(), m.row_lb.data(), m.row_ub.data());
  for (size_t j = 0; j < m.integer.size(); ++j)
    if (m.integer[j]) Cbc_setInteger(model, static_cast<int>(j));
  Cbc_setLogLevel(model, 0);
  // CBC 2.10.8's integer preprocessing aborts on some of these instances
  // (an assertion in OsiClpSolverInterface::crunch, seen on a 12-block
  // plan); without it the 27B instance also solves faster (2.2 s vs 8.8 s).
  Cbc_setParameter(model, "preprocess", "off");
  // The limit is wall-clock time (CBC counts CPU time unless told).
  Cbc_setParameter(model, "timeMode", "elapsed");
  // What building the instance left of the limit.
  Cbc_setMaximumSeconds(model, time_limit_s - seconds_since_start());
  // Close the gap well below the tie-breakers.
  Cbc_setAllowableGap(model, 1e-9);
  Cbc_setAllowableFractionGap(model, 1e-9);
  Cbc_solve(model);

  PlanSolution out;
  const double* x = Cbc_bestSolution(model);
  out.proven_infeasible = Cbc_isProvenInfeasible(model);
  out.feasible = x != nullptr && !out.proven_infeasible;
  out.proven_optimal = out.feasible && Cbc_isProvenOptimal(model);
  out.bound = Cbc_getBestPossibleObjValue(model) * unit;
  if (out.feasible) {
    out.objective = Cbc_getObjValue(model) * unit;
    auto on = [&](int col) { return x[col] > 0.5; };
    out.placements.assign(L + 1, exec::Placement::Recompute);
    for (int i = 0; i <= L; ++i) {
      if (on(g[i])) out.placements[i] = exec::Placement::Gpu;
      if (on(c[i])) out.placements[i] = exec::Placement::Host;
      if (on(n[i])) out.placements[i] = exec::Placement::Disk;
    }
    for (const Edge& ed : edges)
      if (on(ed.col)) out.recompute_s += in.recompute_s(ed.s, ed.e);
    out.read_windows.assign(L + 1, -1);
    out.read_splits.assign(L + 1, {});
    for (int i = 1; i < L; ++i) {
      const exec::Placement p = out.placements[i];
      if (p != exec::Placement::Host && p != exec::Placement::Disk) continue;
      const auto& cols = traffic[static_cast<int>(
          p == exec::Placement::Disk ? Link::DiskRead : Link::HostToDevice)][i];
      // The read window is where the read starts: the split's first piece.
      auto split = read_split(cols, x, 1e-6 * A[i]);
      if (!split.empty()) out.read_windows[i] = split.front().window;
      if (p == exec::Placement::Disk) out.read_splits[i] = std::move(split);
    }
    for (int li = 0; li < kNumLinks; ++li)
      for (int col : excess[li]) {
        out.window_exposed_s[li].push_back(x[col] / in.links[li].gbps);
        out.exposed_s[li] += out.window_exposed_s[li].back();
      }
  }
  Cbc_deleteModel(model);
  out.solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
#endif
}

}  // namespace

PlanSolution solve_milp(const PlanInstance& in, double time_limit_s) {
  return solve(in, time_limit_s, {});
}

PlanSolution price_placements(const PlanInstance& in,
                              const std::vector<exec::Placement>& placements, double time_limit_s) {
  LT_CHECK(placements.size() == static_cast<size_t>(in.num_blocks) + 1,
           "plan: a schedule to price needs L + 1 = ", in.num_blocks + 1, " placements, got ",
           placements.size());
  PlanInstance free = in;
  free.gpu_gb = free.gpu_kept_gb = free.host_gb = free.disk_gb = kInf;
  return solve(free, time_limit_s, placements);
}

}  // namespace lt::plan
