#pragma once
// PlanInstance: the numbers the LazyTrain MILP is built from (arXiv
// 2608.11919; docs/design.md, "The planner"), separated from the model and
// the machine so that tests can build small instances by hand and check
// the solver against brute force.
//
// Boundaries 0..L (L = num_blocks); boundary i enters block i, boundary L
// enters the head. A kept boundary is on the GPU, the host or the disk; the
// boundaries between two kept ones are recomputed in backward from the
// first (a recompute edge (s, e) costs the forward time of blocks s..e-2).
//
// Windows: compute windows 0..L, in forward (block w, then the head as
// window L) and in backward (the head first as window L, then blocks L-1
// down to 0). Offload traffic is spread over windows:
//   - device->host and disk writes of boundary i: forward windows w >= i;
//   - host->device and disk reads of boundary i, whose recompute edge ends
//     at e: backward windows w >= e (done before backward reaches block e-1).
// Each window of each link has a capacity (bandwidth x window duration) of
// which `mandatory` bytes (weights, gradients) are taken first; bytes beyond
// what is left are exposed, costing bytes / gbps seconds. Exposure that the
// mandatory traffic alone causes is not the activations' doing and is not
// charged (the Delta of the paper).
#include <array>
#include <limits>
#include <vector>

namespace lt::plan {

enum class Link { DeviceToHost, DiskWrite, HostToDevice, DiskRead };
inline constexpr int kNumLinks = 4;
const char* link_name(Link link);  // "d2h", "disk_write", "h2d", "disk_read"

struct LinkWindows {
  std::vector<double> capacity_gb;   // per window 0..L
  std::vector<double> mandatory_gb;  // per window 0..L
  double gbps = 1;                   // prices exposed bytes
  // What window w leaves for activations: max(0, capacity - mandatory).
  double slack_gb(int w) const;
};

struct PlanInstance {
  int num_blocks = 0;               // L
  std::vector<double> boundary_gb;  // A_i, i = 0..L
  std::vector<double> forward_s;    // rho_j, block j = 0..L-1
  int max_recompute = 8;            // largest e - s of a recompute edge
  double gpu_gb = 0;                // kept GPU boundaries + recompute buffer
  double gpu_kept_gb = std::numeric_limits<double>::infinity();  // kept GPU boundaries
  double host_gb = 0;
  double disk_gb = 0;
  std::array<LinkWindows, kNumLinks> links;
  // Tie-breakers, in seconds: per kept boundary; more per offloaded one
  // (host or disk: the copies cost host bandwidth even when hidden); more
  // again per disk boundary.
  double keep_penalty_s = 1e-7;
  double offload_penalty_s = 2e-7;
  double disk_penalty_s = 1e-6;

  const LinkWindows& link(Link l) const { return links[static_cast<int>(l)]; }
  LinkWindows& link(Link l) { return links[static_cast<int>(l)]; }
  // R(s, e) = sum of forward_s[j] for j = s .. e-2.
  double recompute_s(int s, int e) const;
  // Bytes of the boundaries strictly between s and e (what backward holds
  // while it walks back through a recomputed run).
  double inside_gb(int s, int e) const;
  void check() const;  // sizes agree; throws lt::Error otherwise
};

}  // namespace lt::plan
