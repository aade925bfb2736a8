#include "plan/brute_force.h"

#include <algorithm>
#include <limits>

namespace lt::testing {

namespace {

using exec::Placement;
using plan::Link;

// Bytes that fit into windows when item k may use windows first[k]..L and
// window w has room slack[w]. The sets are nested suffixes, so by the
// max-flow min-cut theorem the most that fits is
//   min over t of ( demand of items with first < t  +  room of windows >= t ).
double max_fit(const std::vector<double>& demand, const std::vector<int>& first,
               const std::vector<double>& slack) {
  const int windows = static_cast<int>(slack.size());
  double best = std::numeric_limits<double>::infinity();
  for (int t = 0; t <= windows; ++t) {
    double cut = 0;
    for (size_t k = 0; k < demand.size(); ++k)
      if (first[k] < t) cut += demand[k];
    for (int w = t; w < windows; ++w) cut += slack[w];
    best = std::min(best, cut);
  }
  return best;
}

}  // namespace

double placement_cost(const plan::PlanInstance& in, const std::vector<Placement>& p) {
  const int L = in.num_blocks;
  if (p[0] != Placement::Gpu || p[L] != Placement::Gpu) return -1;
  double cost = 0, gpu = 0, host = 0, disk = 0, buffer = 0;
  int last = 0;
  std::vector<int> next_kept(L + 1, L);
  for (int i = 1; i <= L; ++i) {
    if (p[i] == Placement::Recompute) continue;
    if (i - last > in.max_recompute) return -1;
    cost += in.recompute_s(last, i);
    buffer = std::max(buffer, in.inside_gb(last, i));
    next_kept[last] = i;
    last = i;
  }
  for (int i = 0; i <= L; ++i) {
    if (p[i] == Placement::Recompute) continue;
    cost += in.keep_penalty_s;
    if (p[i] == Placement::Gpu) gpu += in.boundary_gb[i];
    if (p[i] == Placement::Host) host += in.boundary_gb[i], cost += in.offload_penalty_s;
    if (p[i] == Placement::Disk)
      disk += in.boundary_gb[i], cost += in.offload_penalty_s + in.disk_penalty_s;
  }
  const double tol = 1e-9;
  if (gpu + buffer > in.gpu_gb + tol || gpu > in.gpu_kept_gb + tol || host > in.host_gb + tol ||
      disk > in.disk_gb + tol)
    return -1;
  for (int li = 0; li < plan::kNumLinks; ++li) {
    const Link link = static_cast<Link>(li);
    const bool disk_link = link == Link::DiskWrite || link == Link::DiskRead;
    const bool forward = link == Link::DeviceToHost || link == Link::DiskWrite;
    std::vector<double> demand, slack;
    std::vector<int> first;
    for (int i = 1; i < L; ++i) {
      const bool moves =
          disk_link ? p[i] == Placement::Disk : p[i] == Placement::Host || p[i] == Placement::Disk;
      if (!moves) continue;
      demand.push_back(in.boundary_gb[i]);
      first.push_back(forward ? i : next_kept[i]);
    }
    for (int w = 0; w <= L; ++w) slack.push_back(in.links[li].slack_gb(w));
    double total = 0;
    for (double d : demand) total += d;
    cost += (total - max_fit(demand, first, slack)) / in.links[li].gbps;
  }
  return cost;
}

BruteForceResult brute_force(const plan::PlanInstance& in) {
  const int L = in.num_blocks;
  BruteForceResult best;
  std::vector<Placement> p(L + 1, Placement::Gpu);
  const Placement kinds[] = {Placement::Gpu, Placement::Host, Placement::Disk,
                             Placement::Recompute};
  int64_t combos = 1;
  for (int i = 1; i < L; ++i) combos *= 4;
  for (int64_t code = 0; code < combos; ++code) {
    int64_t c = code;
    for (int i = 1; i < L; ++i, c /= 4) p[i] = kinds[c % 4];
    const double cost = placement_cost(in, p);
    if (cost < 0) continue;
    if (!best.feasible || cost < best.objective) {
      best.feasible = true;
      best.objective = cost;
      best.placements = p;
    }
  }
  return best;
}

}  // namespace lt::testing
