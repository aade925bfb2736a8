#include "plan/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace lt::plan {

namespace {

// Batch sizes tried when the user gives none: powers of two and the steps
// between them, up to where weight streaming and the CPU optimizer are hidden
// for the largest models we plan for.
constexpr int64_t kBatchCandidates[] = {1,  2,  4,   8,   16,  24,  32, 48,
                                        64, 96, 128, 192, 256, 384, 512};
// Chunkings tried above the smallest that fits: up to this many times it.
constexpr int64_t kMaxChunkGrowth = 4;

// What is short for the easiest arrangement of boundaries: boundaries 0 and
// L on the GPU, and the fewest interior boundaries a recompute length of k
// allows, placed wherever there is room. Empty when something fits.
std::vector<Shortage> shortages_of(const CostModel& m, const ActivationRoom& room) {
  std::vector<Shortage> out;
  const double a = m.boundary_gb;
  const int L = static_cast<int>(m.config.num_hidden_layers);
  const double gpu_for_ends = std::min(room.gpu_gb, room.gpu_kept_gb);
  if (gpu_for_ends < 2 * a) {
    out.push_back({"gpu", std::llround((2 * a - gpu_for_ends) * kBytesPerGB),
                   "weights buffers, working sets and boundaries 0 and L do not fit in "
                   "gpu_memory_gb"});
  }
  if (room.host_gb < 0) {
    out.push_back({"host", std::llround(-room.host_gb * kBytesPerGB),
                   "master weights, optimizer states, pinned weights and gradients do not fit "
                   "in host_memory_gb"});
  }
  if (!out.empty()) return out;
  double best = std::numeric_limits<double>::infinity();
  int best_k = 1;
  for (int k = 1; k <= m.max_recompute; ++k) {
    const int need = (L + k - 1) / k - 1;  // interior kept boundaries
    const double gpu_left = room.gpu_gb - 2 * a - (k - 1) * a;
    const double kept_left = room.gpu_kept_gb - 2 * a;
    double fits = std::floor(std::max(0.0, std::min(gpu_left, kept_left)) / a + 1e-9) +
                  std::floor(std::max(0.0, room.host_gb) / a + 1e-9) +
                  std::floor(std::max(0.0, room.disk_gb) / a + 1e-9);
    const double short_gb = std::max(0.0, need - fits) * a + std::max(0.0, -gpu_left);
    if (short_gb < best) best = short_gb, best_k = k;
  }
  if (best > 0)
    out.push_back({"gpu+host+disk", std::llround(best * kBytesPerGB),
                   "boundary activations: even recomputing runs of " + std::to_string(best_k) +
                       " blocks, the kept boundaries do not fit"});
  return out;
}

struct Candidate {
  CostModel model;
  ActivationRoom room;
};

// Whether a chunking leaves the GPU room that the recompute runs need.
bool chunk_fits(const Candidate& c, int max_recompute) {
  return c.room.gpu_gb >= 2 * c.model.boundary_gb + (max_recompute - 1) * c.model.boundary_gb;
}

// The chunkings tried for batch b, the first being the one whose
// shortages are reported: the given micro-batch; or the default, or smaller
// chunks when the default's working set leaves no room on the GPU, then
// larger ones (twice, four times the first: each chunk pays a stage's fixed
// cost once, so measured stage times may favour fewer, larger chunks) while
// they leave the room too.
std::vector<Candidate> candidates_for(const models::ModelConfig& config, const HardwareProfile& hw,
                                      const PlanOptions& o, int64_t b) {
  const exec::TrainSizes sizes{b, o.seq_len, o.optimizer, o.compute_bytes};
  const auto make = [&](int64_t m) {
    Candidate c;
    c.model = make_cost_model(config, hw, sizes, m, o.max_recompute);
    c.room = activation_room(c.model);
    return c;
  };
  if (o.micro_batch > 0) return {make(std::min(o.micro_batch, b))};
  std::vector<Candidate> out;
  int64_t first = 0;
  for (int64_t m = default_micro_batch(b, o.seq_len); m >= 1; --m) {
    if (b % m != 0) continue;
    first = m;
    out = {make(m)};
    if (chunk_fits(out.front(), o.max_recompute)) break;
  }
  if (!chunk_fits(out.front(), o.max_recompute)) return out;
  for (int64_t m = 2 * first; m <= b && m <= kMaxChunkGrowth * first; m *= 2) {
    if (b % m != 0) break;
    Candidate c = make(m);
    if (!chunk_fits(c, o.max_recompute)) break;
    out.push_back(std::move(c));
  }
  return out;
}

// bytes_needed of `schedule` with the solver's read windows and disk read
// splits, when the boundaries they bring back early still fit the
// profile's GPU and host memory (the MILP's capacities hold room only for
// the executor's default timing: kMaxTransientBoundaries on the GPU,
// kMaxDiskTransitBuffers on the host); else with the disk boundaries'
// windows and splits alone (host memory for reads ahead), else with none
// (the default timing). Sets them.
exec::MemoryBudget with_read_windows(const models::ModelConfig& config, const HardwareProfile& hw,
                                     const exec::TrainSizes& sizes, exec::Schedule& schedule) {
  const auto fits = [&](const exec::MemoryBudget& b) {
    return b.bytes(exec::MemorySpace::Gpu) <= std::llround(hw.gpu_memory_gb * kBytesPerGB) &&
           b.bytes(exec::MemorySpace::Host) <= std::llround(hw.host_memory_gb * kBytesPerGB);
  };
  const std::vector<int> solved = schedule.read_windows;
  std::vector<int> disk_only = solved;
  for (size_t i = 0; i < disk_only.size(); ++i)
    if (schedule.boundaries[i] != exec::Placement::Disk) disk_only[i] = -1;
  for (const std::vector<int>& windows : {solved, disk_only}) {
    schedule.read_windows = windows;
    const exec::MemoryBudget budget = exec::bytes_needed(config, sizes, schedule);
    if (fits(budget)) return budget;
  }
  schedule.read_windows.clear();
  schedule.read_splits.clear();
  return exec::bytes_needed(config, sizes, schedule);
}

// The solver's disk read splits with more than one piece (one piece is the
// whole read, which the read window alone says; a split starts in the read
// window by construction, milp.cpp).
std::vector<std::vector<exec::Schedule::ReadPiece>> split_reads(const PlanSolution& solution) {
  std::vector<std::vector<exec::Schedule::ReadPiece>> splits(solution.placements.size());
  bool any = false;
  for (size_t i = 0; i < solution.read_splits.size() && i < splits.size(); ++i) {
    const auto& split = solution.read_splits[i];
    if (split.size() < 2) continue;
    splits[i] = split;
    any = true;
  }
  if (!any) splits.clear();
  return splits;
}

}  // namespace

int64_t default_micro_batch(int64_t batch_size, int64_t seq_len) {
  for (int64_t m = 1; m <= batch_size; ++m)
    if (batch_size % m == 0 && m * seq_len >= kMinChunkTokens) return m;
  return batch_size;
}

Plan make_plan(const models::ModelConfig& config, const HardwareProfile& hw, const PlanOptions& o) {
  LT_CHECK(o.seq_len > 0, "plan: --seq-len must be > 0, got ", o.seq_len);
  LT_CHECK(o.batch_size >= 0, "plan: --batch-size must be > 0 (or left out), got ", o.batch_size);
  LT_CHECK(config.num_hidden_layers >= 1, "plan: the model has no layers");
  std::vector<int64_t> batches;
  if (o.batch_size > 0)
    batches.push_back(o.batch_size);
  else
    batches.assign(std::begin(kBatchCandidates), std::end(kBatchCandidates));

  Plan best;
  double solve_s = 0;
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    const std::vector<Candidate> candidates = candidates_for(config, hw, o, batches[bi]);
    std::vector<Shortage> shortages =
        shortages_of(candidates.front().model, candidates.front().room);
    if (!shortages.empty()) {
      // Larger batches only need more memory: stop at the first that fails.
      if (!best.feasible && best.shortages.empty()) best.shortages = shortages;
      break;
    }
    bool solved_any = false;
    for (size_t ci = 0; ci < candidates.size(); ++ci) {
      const Candidate& c = candidates[ci];
      if (ci > 0 && !shortages_of(c.model, c.room).empty()) break;
      // Out of time: keep the best plan so far.
      if (best.feasible && o.time_limit_s - solve_s < 0.5) break;
      const PlanInstance instance = build_instance(c.model);
      // Each remaining batch gets an equal share of what is left, split
      // between its chunkings.
      const double limit =
          std::max(1.0, (o.time_limit_s - solve_s) / static_cast<double>(batches.size() - bi) /
                            static_cast<double>(candidates.size() - ci));
      PlanSolution solution = solve_milp(instance, limit);
      solve_s += solution.solve_s;
      if (!solution.feasible) {
        if (ci > 0) break;  // a larger chunk leaves less room: keep the smaller one's plan
        if (!best.feasible && best.shortages.empty())
          best.shortages.push_back(
              {"gpu+host+disk", 0,
               solution.proven_infeasible
                   ? "boundary activations: no placement meets every capacity and the maximum "
                     "recompute length together (each alone leaves room)"
                   : "the solver found no placement within " + std::to_string(limit) + " s"});
        break;
      }
      solved_any = true;
      const StepPrediction prediction = predict_step(c.model, instance, solution);
      if (best.feasible && prediction.tokens_per_s <= best.prediction.tokens_per_s) continue;
      best.feasible = true;
      best.shortages.clear();
      best.sizes = c.model.sizes;
      best.room = c.room;
      best.stage_times_from = c.model.stage_times_from;
      best.prediction = prediction;
      best.solution = std::move(solution);
      best.schedule = exec::Schedule{};
      best.schedule.batch_size = c.model.sizes.batch_size;
      best.schedule.micro_batch = c.model.micro_batch;
      best.schedule.executor = "streaming";
      best.schedule.boundaries = best.solution.placements;
      best.schedule.read_windows = best.solution.read_windows;
      best.schedule.read_splits = split_reads(best.solution);
      best.budget = with_read_windows(config, hw, best.sizes, best.schedule);
      best.schedule.has_prediction = true;
      best.schedule.predicted_step_s = prediction.step_s;
      for (auto space : {exec::MemorySpace::Gpu, exec::MemorySpace::Host, exec::MemorySpace::Disk})
        best.schedule.predicted_peak_bytes[exec::memory_space_name(space)] =
            best.budget.bytes(space);
    }
    if (!solved_any) break;
  }
  best.solve_s = solve_s;
  return best;
}

}  // namespace lt::plan
