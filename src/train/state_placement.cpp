#include "train/state_placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "plan/state_placement.h"
#include "train/schedule_auto.h"

namespace lt::train {

namespace {

std::string gb(int64_t bytes) {
  return fmt::format("{:.6g} GB ({} bytes)", static_cast<double>(bytes) / 1e9, bytes);
}

}  // namespace

HostBudget host_budget(const TrainConfig& c) {
  HostBudget b;
  if (c.exec.host_memory_gb > 0) {
    b.bytes = std::llround(c.exec.host_memory_gb * 1e9);
    b.from = fmt::format("exec.host_memory_gb ({} GB)", c.exec.host_memory_gb);
    return b;
  }
  b.bytes = free_memory_for_run(c, -1).host_bytes;
  b.from = "the host memory free now, less 1 GiB (exec.host_memory_gb unset)";
  return b;
}

std::vector<bool> resolve_state_placement(const TrainConfig& c, const models::ModelConfig& model,
                                          exec::TrainSizes sizes, const exec::Schedule& schedule,
                                          int64_t host_extra, std::vector<std::string>& reasons) {
  const std::string& mode = c.exec.state_placement;
  const size_t stages = static_cast<size_t>(model.num_hidden_layers) + 2;
  const HostBudget budget = host_budget(c);
  const bool capped = c.exec.host_memory_gb > 0;
  std::vector<bool> on_disk(stages, mode == "disk");
  int64_t host_bytes = 0;
  if (mode == "auto" && budget.bytes >= 0) {
    const plan::StatePlacementChoice choice =
        plan::place_states(model, sizes, schedule, budget.bytes, host_extra);
    on_disk = choice.on_disk;
    host_bytes = choice.host_bytes;
  } else {
    sizes.states_on_disk = on_disk;
    host_bytes =
        exec::bytes_needed(model, sizes, schedule).bytes(exec::MemorySpace::Host) + host_extra;
  }
  sizes.states_on_disk = on_disk;
  const int disk_stages = static_cast<int>(std::count(on_disk.begin(), on_disk.end(), true));
  const bool checked = capped || mode == "auto";
  if (checked && budget.bytes >= 0 && host_bytes > budget.bytes) {
    const bool all = disk_stages == static_cast<int>(stages);
    fail("exec.host_memory_gb: the run needs ", gb(host_bytes), " of host memory",
         all ? " even with every stage's master weights and optimizer states on disk"
             : fmt::format(" with exec.state_placement {}", mode),
         ", ", gb(host_bytes - budget.bytes), " more than ", budget.from,
         all ? "; give it more host memory (raise exec.host_memory_gb), or lower "
               "train.batch_size or train.seq_len"
             : "; raise exec.host_memory_gb, or set exec.state_placement: auto (or disk)");
  }
  const int64_t disk_bytes = plan::state_traffic(model, sizes).write_bytes;
  if (mode == "auto" && disk_bytes > 0) {
    const int64_t free = free_memory_for_run(c, -1, checkpoint_bytes(c, model)).disk_bytes;
    const std::string dir = c.exec.disk_path.empty() ? c.out.dir : c.exec.disk_path;
    LT_CHECK(free < 0 || disk_bytes <= free, "exec.state_placement auto: ", disk_stages,
             " stages' master weights and optimizer states do not fit ", budget.from, " and need ",
             gb(disk_bytes), " on disk under exec.disk_path (", dir, "), ", gb(disk_bytes - free),
             " more than it has free (less room for the checkpoints; none on a tmpfs, which is "
             "host memory); free some disk, point exec.disk_path elsewhere, or raise "
             "exec.host_memory_gb");
  }
  std::string why;
  if (mode == "auto") {
    why = budget.bytes < 0 ? "the host memory free is unknown: all in host memory"
                           : fmt::format("host bytes {} within {}", gb(host_bytes), budget.from);
  } else {
    why = "as set";
  }
  reasons.push_back(fmt::format("exec.state_placement {}: {} of {} stages on disk ({})", mode,
                                disk_stages, stages, why));
  if (disk_stages == 0) on_disk.clear();
  return on_disk;
}

void check_host_memory_cap(const TrainConfig& c, int64_t host_bytes, const std::string& executor) {
  const HostBudget budget = host_budget(c);
  if (c.exec.host_memory_gb <= 0 || host_bytes <= budget.bytes) return;
  fail("exec.host_memory_gb: exec.mode ", executor,
       " keeps every master weight and optimizer "
       "state in host memory, ",
       gb(host_bytes), ", ", gb(host_bytes - budget.bytes), " more than ", budget.from,
       "; raise exec.host_memory_gb, or set exec.mode: streaming, whose exec.state_placement "
       "auto moves states to disk");
}

}  // namespace lt::train
