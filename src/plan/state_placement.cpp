#include "plan/state_placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

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

namespace {

// A step of the pipeline given `lead`: how many seconds before the step's
// updates could start (its backward's start with updates during the
// backward, else its end) the states thread was free to start the step's
// first reads, queued at its start behind the previous step's write-backs.
// Sets `next_lead`: the same for the step after it.
using OneStep = std::function<UpdatePipeline(double lead, double& next_lead)>;

// The steady state: the step whose first reads had the lead the step
// before it leaves. The lead only shifts the first reads, so a few rounds
// settle it.
UpdatePipeline steady_state(const OneStep& one_step) {
  double lead = 0;
  UpdatePipeline out;
  for (int round = 0; round < 16; ++round) {
    double next_lead = 0;
    out = one_step(lead, next_lead);
    if (std::abs(next_lead - lead) < 1e-9) break;
    lead = next_lead;
  }
  return out;
}

double sum_of(const std::vector<StageUpdate>& stages, double StageUpdate::*field) {
  double sum = 0;
  for (const StageUpdate& st : stages) sum += st.*field;
  return sum;
}

}  // namespace

UpdatePipeline predict_update_pipeline(const std::vector<StageUpdate>& stages,
                                       bool reads_at_step_start) {
  const size_t read_ahead = exec::kStagesOfStatesInFlight - 1;
  std::vector<size_t> disk;
  for (size_t s = 0; s < stages.size(); ++s)
    if (stages[s].on_disk) disk.push_back(s);
  // The state thread's FIFO: R(d0) .. R(d[ahead-1]) (with
  // reads_at_step_start queued at the step's start, so they run during its
  // forward and backward), then W(d[j-ahead]) R(d[j]) for each later j,
  // then the last writes.
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
  const double backwards = sum_of(stages, &StageUpdate::backward_s);

  // Time 0: the backward's end, when the updates are queued and the next
  // forward starts.
  return steady_state([&](double lead, double& next_lead) {
    UpdatePipeline out;
    // Not yet simulated: -infinity (the first reads may end before 0).
    constexpr double kNotYet = -std::numeric_limits<double>::infinity();
    std::vector<double> read_done(stages.size(), kNotYet), update_done(stages.size(), kNotYet),
        ready(stages.size(), kNotYet);
    double disk_free = -lead, optimizer_free = 0;
    size_t next = 0;
    // Runs state tasks until `done` (or the FIFO is empty). A write waits
    // for its stage's update, which has always been simulated by then (its
    // read and every earlier update come before it).
    const auto run_fifo_until = [&](const std::function<bool()>& done) {
      while (next < fifo.size() && !done()) {
        const Task& t = fifo[next++];
        const StageUpdate& st = stages[t.stage];
        if (t.read) {
          disk_free += st.read_s;
          read_done[t.stage] = disk_free;
          out.disk_busy_s += st.read_s;
        } else {
          LT_CHECK(update_done[t.stage] > kNotYet, "update pipeline: a write before its update");
          disk_free = std::max(disk_free, update_done[t.stage]) + st.write_s;
          ready[t.stage] = disk_free;
          out.disk_busy_s += st.write_s;
        }
      }
    };
    for (size_t s = 0; s < stages.size(); ++s) {
      double start = optimizer_free;
      if (stages[s].on_disk) {
        run_fifo_until([&] { return read_done[s] > kNotYet; });
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
    // The next step's first reads start when it does (0) and this step's
    // write-backs are done; its updates when its backward ends.
    next_lead =
        reads_at_step_start ? std::max(0.0, forward_end + backwards - std::max(0.0, disk_free)) : 0;
    return out;
  });
}

UpdatePipeline predict_update_pipeline_during_backward(const std::vector<StageUpdate>& stages) {
  const size_t n = stages.size();
  const size_t ahead = exec::kStagesOfStatesInFlight;
  std::vector<double> land(n, 0);
  double backward_end = 0;
  for (size_t s = n; s-- > 0;) land[s] = backward_end += stages[s].backward_s;
  std::vector<size_t> disk;  // backward order
  for (size_t s = n; s-- > 0;)
    if (stages[s].on_disk) disk.push_back(s);

  // Time 0: the backward's start (the head's step). The states thread's
  // FIFO (Note [Updates during the backward]): R(e0) .. R(e[ahead-1])
  // queued at the step's start, then for each disk stage as its gradients
  // land, W(ej) (after U(ej)) and R(e[j+ahead]) behind it.
  return steady_state([&](double lead, double& next_lead) {
    UpdatePipeline out;
    std::vector<double> read_done(n, 0), ready(n, 0);
    double disk_free = -lead, optimizer_free = 0, updates = 0;
    const auto read = [&](size_t j) {
      const StageUpdate& st = stages[disk[j]];
      read_done[disk[j]] = disk_free += st.read_s;
      out.disk_busy_s += st.read_s;
    };
    for (size_t j = 0; j < std::min(ahead, disk.size()); ++j) read(j);
    size_t j = 0;  // disk stages updated
    for (size_t s = n; s-- > 0;) {
      const StageUpdate& st = stages[s];
      double start = std::max(optimizer_free, land[s]);
      if (st.on_disk) start = std::max(start, read_done[s]);
      optimizer_free = start + st.update_s;
      updates += st.update_s;
      ready[s] = optimizer_free;
      if (!st.on_disk) continue;
      ready[s] = disk_free = std::max(disk_free, optimizer_free) + st.write_s;
      out.disk_busy_s += st.write_s;
      if (j + ahead < disk.size()) read(j + ahead);
      ++j;
    }
    // The next forward; its head step is the next step's time 0.
    double forward_end = backward_end, forwards = 0, next_start = 0;
    for (size_t s = 0; s < n; ++s) {
      forward_end = std::max(forward_end, ready[s]);
      if (s + 1 == n) next_start = forward_end;
      forward_end += stages[s].forward_s;
      forwards += stages[s].forward_s;
    }
    // The next step's first reads start when it does (its forward, at the
    // backward's end) and this step's write-backs are done.
    next_lead = std::max(0.0, next_start - std::max(backward_end, disk_free));
    const double compute = backward_end + forwards;
    // At least 0: forward_end - compute rounds to -4e-16 when nothing waits
    // (a plan printed "optimizer -0.0000").
    out.exposed_s =
        std::max({0.0, forward_end - compute, updates - compute, out.disk_busy_s - compute});
    return out;
  });
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
  const bool all = names.size() == static_cast<size_t>(L + 2);
  return fmt::format(
      "master weights and optimizer states: {} stages on disk ({}{}){}; per step the disk reads "
      "{:.3f} GB and writes {:.3f} GB ({:.2f} s at {} GB/s, {:.2f} s at {} GB/s)",
      all ? fmt::format("all {}", L + 2) : fmt::format("{} of {}", names.size(), L + 2),
      names.front(), names.size() > 1 ? " .. " + names.back() : "",
      all ? "" : ", the rest in host memory", static_cast<double>(t.read_bytes) / kBytesPerGB,
      static_cast<double>(t.write_bytes) / kBytesPerGB,
      static_cast<double>(t.read_bytes) / kBytesPerGB / disk_read_gbps, disk_read_gbps,
      static_cast<double>(t.write_bytes) / kBytesPerGB / disk_write_gbps, disk_write_gbps);
}

}  // namespace lt::plan
