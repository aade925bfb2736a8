#include "train/state_placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"
#include "plan/hardware.h"
#include "plan/state_placement.h"
#include "train/executor_choice.h"
#include "train/schedule_auto.h"

namespace lt::train {

std::string disk_short_of_checkpoints(const TrainConfig& c, const FreeMemory& room) {
  if (room.disk_is_host_memory) return " (a tmpfs is host memory: no disk for them there)";
  if (room.checkpoints_kept_for == 0) return "";
  const int64_t each = room.disk_kept_for_checkpoints / room.checkpoints_kept_for;
  return fmt::format(
      " once the run's checkpoints have their room: the file system has {} free, and the "
      "checkpoints this run writes to out.dir take up to {} ({} more of {} each{}){}",
      gigabytes(room.disk_free), gigabytes(room.disk_kept_for_checkpoints),
      room.checkpoints_kept_for, gigabytes(each),
      room.checkpoints_kept_by_keep_last
          ? fmt::format(": train.keep_last {} and the one being written, less those there now",
                        c.train.keep_last)
          : std::string(", one per save the run has left"),
      room.checkpoints_kept_by_keep_last
          ? std::string("; a lower train.keep_last") +
                (c.optim.name == "adamw8bit" ? "" : ", or optim.name adamw8bit (smaller states),") +
                " leaves more"
      : c.optim.name == "adamw8bit" ? std::string()
                                    : "; optim.name adamw8bit (smaller states) leaves more");
}

HostBudget host_budget(const TrainConfig& c, FreeMemoryOf of) {
  HostBudget b;
  const FreeMemory free = free_memory_for_run(c, of, -1);
  const double gb = auto_hardware(c, free).host_memory_gb;
  if (!std::isfinite(gb)) return b;
  b.bytes = std::llround(gb * plan::kBytesPerGB);
  if (c.exec.host_memory_gb > 0 && gb >= c.exec.host_memory_gb) {
    b.from = fmt::format("exec.host_memory_gb ({} GB)", c.exec.host_memory_gb);
  } else if (free.host_bytes >= 0 && b.bytes >= free.host_bytes) {
    b.from = fmt::format("the host memory free now, less 1 GiB ({:.3f} GB{})", gb,
                         c.exec.host_memory_gb > 0 ? ", below exec.host_memory_gb" : "");
  } else {
    b.from = fmt::format("the hardware profile's host_memory_gb ({:.3f} GB)", gb);
  }
  return b;
}

namespace {

struct Attempt {
  std::vector<bool> on_disk;
  int64_t host_bytes = 0;
  int disk_stages() const {
    return static_cast<int>(std::count(on_disk.begin(), on_disk.end(), true));
  }
};

// The executor's host bytes with sizes.states_on_disk.
using HostCount = std::function<int64_t(const exec::TrainSizes&)>;

// exec.state_placement's stages on disk, and the host bytes they leave,
// with or without f32 weight uploads: auto moves stages in
// plan::disk_order until the count fits (as plan::place_states does for
// the streaming executor's count).
Attempt place(const TrainConfig& c, const models::ModelConfig& model, exec::TrainSizes sizes,
              const HostCount& host_count, const HostBudget& budget, bool f32_uploads) {
  const std::string& mode = c.exec.state_placement;
  sizes.f32_weight_uploads = f32_uploads;
  Attempt a;
  a.on_disk.assign(static_cast<size_t>(model.num_hidden_layers) + 2, mode == "disk");
  const bool search = mode == "auto" && budget.bytes >= 0;
  const std::vector<int> order = plan::disk_order(model);
  for (size_t moved = 0;; ++moved) {
    sizes.states_on_disk = a.on_disk;
    a.host_bytes = host_count(sizes);
    if (!search || a.host_bytes <= budget.bytes || moved == order.size()) return a;
    a.on_disk[static_cast<size_t>(order[moved])] = true;
  }
}

// resolve_host_placement with the executor's count; `uploads_choice`: the
// executor uploads from f32 masters or bf16 copies (exec.weight_uploads).
HostPlacement resolve(const TrainConfig& c, const models::ModelConfig& model,
                      exec::TrainSizes sizes, const HostCount& host_count, bool uploads_choice,
                      FreeMemoryOf of, std::vector<std::string>& reasons) {
  const std::string& mode = c.exec.state_placement;
  const std::string& uploads = c.exec.weight_uploads;
  const size_t stages = static_cast<size_t>(model.num_hidden_layers) + 2;
  const HostBudget budget = host_budget(c, of);
  const bool capped = c.exec.host_memory_gb > 0;
  // Only a GPU uploads bf16 from f32 masters; the stand-in uploads the f32
  // masters as they are in any case.
  bool f32 = uploads_choice && sizes.on_gpu && uploads == "f32";
  Attempt a = place(c, model, sizes, host_count, budget, f32);
  std::string uploads_why = uploads == "auto" ? "" : "as set";
  if (uploads_choice && sizes.on_gpu && uploads == "auto") {
    uploads_why = "every stage fits host memory with the bf16 copies";
    if (budget.bytes < 0) uploads_why = "the host memory free is unknown";
    const bool all_in_host = a.disk_stages() == 0 && a.host_bytes <= budget.bytes;
    if (budget.bytes >= 0 && !all_in_host) {
      Attempt b = place(c, model, sizes, host_count, budget, true);
      const bool fewer_on_disk = b.disk_stages() < a.disk_stages();
      const bool fits_only_so = b.host_bytes <= budget.bytes && a.host_bytes > budget.bytes;
      if (fewer_on_disk || fits_only_so) {
        uploads_why = fmt::format(
            "the bf16 copies would leave {} stages' states on disk{}; the f32 masters {}",
            a.disk_stages(), a.host_bytes > budget.bytes ? " and still not fit" : "",
            b.disk_stages() == 0 ? "keep every stage in host memory"
                                 : fmt::format("{}", b.disk_stages()));
        a = std::move(b);
        f32 = true;
      } else {
        uploads_why = "the f32 masters would put no fewer stages on disk";
      }
    }
  }
  sizes.f32_weight_uploads = f32;
  sizes.states_on_disk = a.on_disk;
  const int disk_stages = a.disk_stages();
  const bool checked = capped || mode == "auto";
  if (checked && budget.bytes >= 0 && a.host_bytes > budget.bytes) {
    const bool all = disk_stages == static_cast<int>(stages);
    fail_does_not_fit(
        "exec.host_memory_gb: the run needs ", gigabytes(a.host_bytes), " of host memory",
        all ? " even with every stage's master weights and optimizer states on disk"
            : fmt::format(" with exec.state_placement {}", mode),
        ", ", gigabytes(a.host_bytes - budget.bytes), " more than ", budget.from,
        all ? "; give it more host memory (raise exec.host_memory_gb), or lower "
              "train.batch_size or train.seq_len"
            : "; raise exec.host_memory_gb, or set exec.state_placement: auto (or disk)");
  }
  const int64_t disk_bytes = plan::state_traffic(model, sizes).write_bytes;
  if (mode == "auto" && disk_bytes > 0) {
    const FreeMemory room = free_memory_for_run(c, of, -1, checkpoint_bytes(c, model));
    const int64_t free = room.disk_bytes;
    const std::string dir = c.exec.disk_path.empty() ? c.out.dir : c.exec.disk_path;
    const std::string kept = disk_short_of_checkpoints(c, room);
    if (free >= 0 && disk_bytes > free)
      fail_does_not_fit("exec.state_placement auto: ", disk_stages,
                        " stages' master weights and optimizer states do not fit ", budget.from,
                        " and need ", gigabytes(disk_bytes), " on disk under exec.disk_path (", dir,
                        "), ", gigabytes(disk_bytes - free), " more than is free there", kept,
                        "; else free some disk, point exec.disk_path elsewhere, or raise "
                        "exec.host_memory_gb");
  }
  std::string why;
  if (mode == "auto") {
    why = budget.bytes < 0
              ? "the host memory free is unknown: all in host memory"
              : fmt::format("host bytes {} within {}", gigabytes(a.host_bytes), budget.from);
  } else {
    why = "as set";
  }
  reasons.push_back(fmt::format("exec.state_placement {}: {} of {} stages on disk ({})", mode,
                                disk_stages, stages, why));
  if (uploads_choice && sizes.on_gpu)
    reasons.push_back(fmt::format("exec.weight_uploads {}: {} ({})", uploads,
                                  f32 ? "the f32 masters, pinned, converted to bf16 on the GPU"
                                      : "pinned bf16 copies the CPU update writes",
                                  uploads_why));
  HostPlacement placed;
  if (disk_stages > 0) placed.states_on_disk = std::move(a.on_disk);
  placed.f32_weight_uploads = f32;
  placed.host_budget_bytes = budget.bytes;
  return placed;
}

}  // namespace

HostPlacement resolve_host_placement(const TrainConfig& c, const models::ModelConfig& model,
                                     exec::TrainSizes sizes, const exec::Schedule& schedule,
                                     int64_t host_extra, FreeMemoryOf of,
                                     std::vector<std::string>& reasons) {
  const HostCount count = [&](const exec::TrainSizes& s) {
    return exec::bytes_needed(model, s, schedule).bytes(exec::MemorySpace::Host) + host_extra;
  };
  return resolve(c, model, std::move(sizes), count, /*uploads_choice=*/true, of, reasons);
}

HostPlacement resolve_offload_placement(const TrainConfig& c, const models::ModelConfig& model,
                                        exec::TrainSizes sizes, int64_t micro_batch,
                                        double zenflow_topk, FreeMemoryOf of,
                                        std::vector<std::string>& reasons) {
  const HostCount count = [&](const exec::TrainSizes& s) {
    return exec::offload_bytes_needed(model, s, micro_batch, zenflow_topk)
        .bytes(exec::MemorySpace::Host);
  };
  return resolve(c, model, std::move(sizes), count, /*uploads_choice=*/false, of, reasons);
}

double offload_state_disk_s(const plan::HardwareProfile& hw, const models::ModelConfig& model,
                            const exec::TrainSizes& sizes) {
  if (!sizes.any_states_on_disk()) return 0;
  const bool fp32 = sizes.optimizer == exec::OptimizerStates::Fp32;
  const double params_per_s =
      (fp32 ? hw.cpu_adam_gparams_per_s : hw.cpu_adam8bit_gparams_per_s) * 1e9;
  std::vector<plan::StageUpdate> stages;
  for (size_t s = 0; s < sizes.states_on_disk.size(); ++s) {
    const int64_t n = exec::stage_parameters(model, static_cast<int>(s));
    plan::StageUpdate st;
    st.update_s = static_cast<double>(n) / params_per_s;
    st.on_disk = sizes.states_on_disk[s];
    if (st.on_disk) {
      const auto bytes = static_cast<double>(exec::master_and_state_bytes(n, sizes));
      st.read_s = bytes / (hw.disk_read_gbps * plan::kBytesPerGB);
      st.write_s = bytes / (hw.disk_write_gbps * plan::kBytesPerGB);
    }
    stages.push_back(st);
  }
  const double with_disk = plan::predict_update_pipeline(stages).exposed_s;
  for (plan::StageUpdate& st : stages) st.on_disk = false;
  return std::max(0.0, with_disk - plan::predict_update_pipeline(stages).exposed_s);
}

}  // namespace lt::train
