#include "plan/instance.h"

#include <algorithm>

#include "core/error.h"

namespace lt::plan {

const char* link_name(Link link) {
  switch (link) {
    case Link::DeviceToHost:
      return "d2h";
    case Link::DiskWrite:
      return "disk_write";
    case Link::HostToDevice:
      return "h2d";
    case Link::DiskRead:
      return "disk_read";
  }
  return "?";
}

double LinkWindows::slack_gb(int w) const {
  return std::max(0.0, capacity_gb.at(w) - mandatory_gb.at(w));
}

double PlanInstance::recompute_s(int s, int e) const {
  double sum = 0;
  for (int j = s; j <= e - 2; ++j) sum += forward_s.at(j);
  return sum;
}

double PlanInstance::inside_gb(int s, int e) const {
  double sum = 0;
  for (int k = s + 1; k < e; ++k) sum += boundary_gb.at(k);
  return sum;
}

void PlanInstance::check() const {
  const size_t n = static_cast<size_t>(num_blocks) + 1;
  LT_CHECK(num_blocks >= 1, "plan instance: need at least one block");
  LT_CHECK(boundary_gb.size() == n, "plan instance: boundary_gb needs L + 1 entries");
  LT_CHECK(forward_s.size() == n - 1, "plan instance: forward_s needs L entries");
  LT_CHECK(max_recompute >= 1, "plan instance: max_recompute must be >= 1");
  for (const auto& l : links) {
    LT_CHECK(l.capacity_gb.size() == n && l.mandatory_gb.size() == n,
             "plan instance: every link needs L + 1 windows");
    LT_CHECK(l.gbps > 0, "plan instance: link bandwidth must be > 0");
  }
}

}  // namespace lt::plan
