#include "plan/state_placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "core/error.h"
#include "plan/hardware.h"

namespace lt::plan {

std::vector<int> disk_order(const models::ModelConfig& config) {
  const int L = static_cast<int>(config.num_hidden_layers);
  std::vector<int> order;
  for (int block = L; block >= 1; --block) order.push_back(block);
  order.push_back(L + 1);
  order.push_back(0);
  return order;
}

int StatePlacementChoice::disk_stages() const {
  return static_cast<int>(std::count(on_disk.begin(), on_disk.end(), true));
}

StatePlacementChoice place_states(const models::ModelConfig& config, exec::TrainSizes sizes,
                                  const exec::Schedule& schedule, int64_t host_budget,
                                  int64_t host_extra) {
  const std::vector<int> order = disk_order(config);
  StatePlacementChoice choice;
  choice.on_disk.assign(order.size(), false);
  for (size_t moved = 0;; ++moved) {
    sizes.states_on_disk = choice.on_disk;
    choice.host_bytes =
        exec::bytes_needed(config, sizes, schedule).bytes(exec::MemorySpace::Host) + host_extra;
    choice.short_bytes = std::max<int64_t>(0, choice.host_bytes - host_budget);
    if (choice.short_bytes == 0 || moved == order.size()) return choice;
    choice.on_disk[static_cast<size_t>(order[moved])] = true;
  }
}

UpdatePipeline predict_update_pipeline(const std::vector<StageUpdate>& stages) {
  const size_t read_ahead = exec::kStagesOfStatesInFlight - 1;
  std::vector<size_t> disk;
  for (size_t s = 0; s < stages.size(); ++s)
    if (stages[s].on_disk) disk.push_back(s);
  // The state thread's FIFO: R(d0) .. R(d[ahead-1]), then W(d[j-ahead])
  // R(d[j]) for each later j, then the last writes.
  struct Task {
    size_t stage;
    bool read;
  };
  std::vector<Task> fifo;
  for (size_t j = 0; j < disk.size(); ++j) {
    if (j >= read_ahead) fifo.push_back({disk[j - read_ahead], false});
    fifo.push_back({disk[j], true});
  }
  for (size_t j = disk.size() > read_ahead ? disk.size() - read_ahead : 0; j < disk.size(); ++j)
    fifo.push_back({disk[j], false});

  UpdatePipeline out;
  std::vector<double> read_done(stages.size(), -1), update_done(stages.size(), -1),
      ready(stages.size(), -1);
  double disk_free = 0, optimizer_free = 0;
  size_t next = 0;
  // Runs state tasks until `done` (or the FIFO is empty). A write waits for
  // its stage's update, which has always been simulated by then (its read
  // and every earlier update come before it).
  const auto run_fifo_until = [&](const std::function<bool()>& done) {
    while (next < fifo.size() && !done()) {
      const Task& t = fifo[next++];
      const StageUpdate& st = stages[t.stage];
      if (t.read) {
        disk_free += st.read_s;
        read_done[t.stage] = disk_free;
        out.disk_busy_s += st.read_s;
      } else {
        LT_CHECK(update_done[t.stage] >= 0, "update pipeline: a write before its update");
        disk_free = std::max(disk_free, update_done[t.stage]) + st.write_s;
        ready[t.stage] = disk_free;
        out.disk_busy_s += st.write_s;
      }
    }
  };
  for (size_t s = 0; s < stages.size(); ++s) {
    double start = optimizer_free;
    if (stages[s].on_disk) {
      run_fifo_until([&] { return read_done[s] >= 0; });
      start = std::max(start, read_done[s]);
    }
    optimizer_free = update_done[s] = start + stages[s].update_s;
    if (!stages[s].on_disk) ready[s] = update_done[s];
  }
  run_fifo_until([] { return false; });
  // The next forward, stage by stage, each waiting for its stage.
  double forward_end = 0, forwards = 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    forward_end = std::max(forward_end, ready[s]) + stages[s].forward_s;
    forwards += stages[s].forward_s;
  }
  out.exposed_s = forward_end - forwards;
  return out;
}

UpdatePipeline predict_update_pipeline_during_backward(const std::vector<StageUpdate>& stages) {
  const size_t n = stages.size();
  std::vector<double> land(n, 0), ready(n, 0), update_done(n, 0);
  double backward_end = 0;
  for (size_t s = n; s-- > 0;) land[s] = backward_end += stages[s].backward_s;
  UpdatePipeline out;
  double disk_free = 0, optimizer_free = 0, updates = 0;
  std::vector<size_t> disk;  // disk stages whose update has been simulated, backward order
  const auto write_back = [&](size_t d) {
    disk_free = std::max(disk_free, update_done[d]) + stages[d].write_s;
    ready[d] = disk_free;
    out.disk_busy_s += stages[d].write_s;
  };
  for (size_t s = n; s-- > 0;) {
    double start = std::max(optimizer_free, land[s]);
    if (stages[s].on_disk) {
      // R(s) is queued as its backward ends, behind W of the disk stage two
      // before it, which was queued with the read of the one before it.
      if (disk.size() >= 2) write_back(disk[disk.size() - 2]);
      disk_free = std::max(disk_free, land[s]) + stages[s].read_s;
      out.disk_busy_s += stages[s].read_s;
      start = std::max(start, disk_free);
      disk.push_back(s);
    }
    optimizer_free = update_done[s] = start + stages[s].update_s;
    updates += stages[s].update_s;
    if (!stages[s].on_disk) ready[s] = update_done[s];
  }
  if (disk.size() >= 2) write_back(disk[disk.size() - 2]);
  if (!disk.empty()) write_back(disk.back());
  double forward_end = backward_end, forwards = 0;
  for (size_t s = 0; s < n; ++s) {
    forward_end = std::max(forward_end, ready[s]) + stages[s].forward_s;
    forwards += stages[s].forward_s;
  }
  const double compute = backward_end + forwards;
  out.exposed_s = std::max({forward_end - compute, updates - compute, out.disk_busy_s - compute});
  return out;
}

StateTraffic state_traffic(const models::ModelConfig& config, const exec::TrainSizes& sizes) {
  StateTraffic t;
  for (size_t s = 0; s < sizes.states_on_disk.size(); ++s) {
    if (!sizes.states_on_disk[s]) continue;
    const int64_t bytes =
        exec::master_and_state_bytes(exec::stage_parameters(config, static_cast<int>(s)), sizes);
    t.read_bytes += bytes;
    t.write_bytes += bytes;
  }
  return t;
}

std::string describe_state_placement(const models::ModelConfig& config,
                                     const exec::TrainSizes& sizes, double disk_read_gbps,
                                     double disk_write_gbps) {
  const int L = static_cast<int>(config.num_hidden_layers);
  std::vector<std::string> names;
  for (size_t s = 0; s < sizes.states_on_disk.size(); ++s) {
    if (!sizes.states_on_disk[s]) continue;
    names.push_back(s == 0                         ? std::string("embed")
                    : static_cast<int>(s) == L + 1 ? std::string("head")
                                                   : fmt::format("block {}", s - 1));
  }
  if (names.empty()) return "master weights and optimizer states: all in host memory";
  const StateTraffic t = state_traffic(config, sizes);
  return fmt::format(
      "master weights and optimizer states: {} of {} stages on disk ({}{}), the rest in host "
      "memory; per step the disk reads {:.3f} GB and writes {:.3f} GB ({:.2f} s at {} GB/s, "
      "{:.2f} s at {} GB/s)",
      names.size(), L + 2, names.front(), names.size() > 1 ? " .. " + names.back() : "",
      static_cast<double>(t.read_bytes) / kBytesPerGB,
      static_cast<double>(t.write_bytes) / kBytesPerGB,
      static_cast<double>(t.read_bytes) / kBytesPerGB / disk_read_gbps, disk_read_gbps,
      static_cast<double>(t.write_bytes) / kBytesPerGB / disk_write_gbps, disk_write_gbps);
}

}  // namespace lt::plan
