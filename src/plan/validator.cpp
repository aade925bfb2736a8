#include "plan/validator.h"

#include <sstream>

namespace lt::plan {

std::vector<std::string> schedule_problems(const models::ModelConfig& config,
                                           const exec::TrainSizes& sizes, const HardwareProfile& hw,
                                           const exec::Schedule& schedule, int max_recompute) {
  using exec::Placement;
  std::vector<std::string> problems;
  auto say = [&](auto&&... parts) {
    std::ostringstream os;
    (os << ... << parts);
    problems.push_back(os.str());
  };
  const int64_t L = config.num_hidden_layers;
  const auto& b = schedule.boundaries;
  if (static_cast<int64_t>(b.size()) != L + 1) {
    say("the schedule has ", b.size(), " boundaries, the model ", L + 1);
    return problems;
  }
  if (b.front() != Placement::Gpu) say("boundary 0 must stay on the GPU");
  if (b.back() != Placement::Gpu) say("boundary ", L, " (the head's input) must stay on the GPU");
  // Walk kept boundaries: each gap is a recompute edge from the kept one.
  int64_t last_kept = 0;
  for (int64_t i = 1; i <= L; ++i) {
    if (b[i] == Placement::Recompute) continue;
    if (i - last_kept > max_recompute)
      say("boundaries ", last_kept + 1, "..", i - 1, " are recomputed from boundary ", last_kept,
          ": ", i - last_kept, " blocks, more than the maximum recompute length ", max_recompute);
    last_kept = i;
  }
  const exec::MemoryBudget need = exec::bytes_needed(config, sizes, schedule);
  auto over = [&](exec::MemorySpace space, double limit_gb, const char* key) {
    const double have = limit_gb * kBytesPerGB;
    const double want = static_cast<double>(need.bytes(space));
    if (want > have)
      say(exec::memory_space_name(space), " needs ", want / kBytesPerGB, " GB, more than ", key,
          " = ", limit_gb);
  };
  over(exec::MemorySpace::Gpu, hw.gpu_memory_gb, "gpu_memory_gb");
  over(exec::MemorySpace::Host, hw.host_memory_gb, "host_memory_gb");
  over(exec::MemorySpace::Disk, hw.disk_gb, "disk_gb");
  const double a = static_cast<double>(exec::boundary_bytes(config, sizes));
  int64_t gpu = 0, host = 0;
  for (Placement p : b) {
    gpu += p == Placement::Gpu;
    host += p == Placement::Host;
  }
  if (hw.gpu_activation_gb && gpu * a > *hw.gpu_activation_gb * kBytesPerGB)
    say(gpu, " boundaries on the GPU take ", gpu * a / kBytesPerGB,
        " GB, more than gpu_activation_gb = ", *hw.gpu_activation_gb);
  if (hw.host_activation_gb && host * a > *hw.host_activation_gb * kBytesPerGB)
    say(host, " boundaries on the host take ", host * a / kBytesPerGB,
        " GB, more than host_activation_gb = ", *hw.host_activation_gb);
  return problems;
}

}  // namespace lt::plan
