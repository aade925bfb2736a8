#include "plan/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "core/error.h"

namespace lt::plan {

namespace {

// Another chunking replaces the preferred one only when predicted this much
// faster: a line fitted through two batch sizes is a few percent off away
// from them (on the H200 its intercepts come out slightly negative for some
// stages, which alone would favour ever smaller chunks). Among those that
// clear it the fastest is taken: with stage times measured at chunks of 4,
// 8 and 32, a chunk of 16 lies on the segment between 8 and 32 and gets
// two thirds of 32's gain per sequence, so measured against 16 rather than
// the preferred 8, chunks of 32 (3% faster than 8 on the 3B) would fall
// inside the margin.
// Between two chunk sizes the profile timed (StageTimes::batch_sizes) no
// line is read off, so there the faster prediction is taken as it is: on
// the H200 the 3B's measured times put chunks of 32 only 2.2% ahead of 8
// where the executor ran them 4.6% faster (2.69 s against 2.82 s of compute
// a step), and a margin there kept chunks of 8.
constexpr double kChunkMargin = 0.02;

// When the planning's time (PlanOptions::time_limit_s from make_plan's
// start) is spent: the searches after a solve stop there, keeping what
// they have found (Note [The instance within the time limit], milp.cpp).
using Deadline = std::chrono::steady_clock::time_point;
bool passed(Deadline deadline) {
  return std::chrono::steady_clock::now() >= deadline;
}

// What is short for the easiest arrangement of boundaries: boundaries 0 and
// L on the GPU, and the fewest interior boundaries a recompute length of k
// allows, placed wherever there is room. Empty when something fits.
std::vector<Shortage> shortages_of(const CostModel& m, const ActivationRoom& room) {
  std::vector<Shortage> out;
  const double a = m.boundary_gb;
  const int L = static_cast<int>(m.config.num_hidden_layers);
  const double gpu_for_ends = std::min(room.gpu_gb, room.gpu_kept_gb);
  // Room is computed in GB: less than half a byte short is rounding.
  if (gpu_for_ends + 0.5 / kBytesPerGB < 2 * a) {
    out.push_back({"gpu", std::llround((2 * a - gpu_for_ends) * kBytesPerGB),
                   "weights buffers, working sets and boundaries 0 and L do not fit in "
                   "gpu_memory_gb"});
  }
  if (room.host_gb + 0.5 / kBytesPerGB < 0) {
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

// Why a solve of `instance` given `limit_s` of the time limit found no
// placement (a Shortage's detail).
std::string why_unsolved(const PlanSolution& solution, const PlanInstance& instance,
                         double limit_s) {
  if (solution.proven_infeasible)
    return "boundary activations: no placement meets every capacity and the maximum recompute "
           "length together (each alone leaves room)";
  if (solution.out_of_time_building)
    return fmt::format(
        "the solver's instance for {} blocks (recompute runs of up to {}) was still being built "
        "when its {:.3g} s of the time limit ran out: its variables grow with the square of the "
        "blocks",
        instance.num_blocks, instance.max_recompute, limit_s);
  return fmt::format("the solver found no placement within {:.3g} s", limit_s);
}

struct Candidate {
  CostModel model;
  ActivationRoom room;
};

// Whether `c`'s chunk is a size the profile's stage times were measured at.
bool measured_chunk(const HardwareProfile& hw, const Candidate& c) {
  if (!hw.stage_times || c.model.stage_times_from.rfind("measured", 0) != 0) return false;
  const int64_t chunk =
      c.model.chunk_sequences > 0 ? c.model.chunk_sequences : c.model.sizes.batch_size;
  const auto& sizes = hw.stage_times->batch_sizes;
  return std::find(sizes.begin(), sizes.end(), chunk) != sizes.end();
}

// The sizes of a plan for batch b, with the profile's measured working
// sets when they were measured for this sequence length on the device the
// plan is for (bf16 on a GPU, f32 on the CPU stand-in). The shape was
// checked by make_cost_model.
exec::TrainSizes train_sizes(const HardwareProfile& hw, const PlanOptions& o, int64_t b) {
  exec::TrainSizes sizes{b, o.seq_len, o.optimizer, o.compute_bytes};
  sizes.optimizer_block = o.optimizer_block;
  sizes.on_gpu = o.on_gpu;
  sizes.states_on_disk = o.states_on_disk;
  sizes.f32_weight_uploads = o.f32_weight_uploads;
  if (!hw.stage_times || !hw.stage_times->has_working_sets()) return sizes;
  const StageTimes& t = *hw.stage_times;
  const bool same_device = (t.device == "cuda") == o.on_gpu;
  if (t.seq_len != o.seq_len || !same_device) return sizes;
  sizes.measured_block_backward = {t.block_backward_bytes.a, t.block_backward_bytes.b};
  sizes.measured_head_step = {t.head_step_bytes.a, t.head_step_bytes.b};
  return sizes;
}

// Whether a chunking leaves the GPU room that the recompute runs need.
bool chunk_fits(const Candidate& c, int max_recompute) {
  return c.room.gpu_gb >= 2 * c.model.boundary_gb + (max_recompute - 1) * c.model.boundary_gb;
}

// The chunkings tried for batch b, in order of preference: the given
// chunk; else the default, then smaller ones down to the first that
// leaves room for the recompute runs (when the default does not), then
// chunks of 2x and 4x the default (each chunk pays a stage's fixed cost
// once, so measured stage times may favour fewer, larger chunks). A later
// one is taken only when its prediction is clearly faster (make_plan).
std::vector<Candidate> candidates_for(const models::ModelConfig& config, const HardwareProfile& hw,
                                      const PlanOptions& o, int64_t b) {
  const exec::TrainSizes sizes = train_sizes(hw, o, b);
  const auto make = [&](int64_t m) {
    Candidate c;
    c.model = make_cost_model(config, hw, sizes, m, o.max_recompute);
    c.model.updates_during_backward = o.updates_during_backward;
    c.room = activation_room(c.model);
    return c;
  };
  if (o.chunk_sequences > 0) return {make(std::min(o.chunk_sequences, b))};
  // Chunks divide a micro-batch (PlanOptions::micro_batch), which divides b.
  const int64_t unit = o.micro_batch > 0 && b % o.micro_batch == 0 ? o.micro_batch : b;
  const int64_t first = default_chunk_sequences(unit, o.seq_len);
  std::vector<Candidate> out = {make(first)};
  for (int64_t m = first - 1; m >= 1 && !chunk_fits(out.back(), o.max_recompute); --m)
    if (unit % m == 0) out.push_back(make(m));
  for (int64_t m = 2 * first; m <= unit && m <= kMaxChunkGrowth * first && unit % m == 0; m *= 2) {
    Candidate c = make(m);
    if (!shortages_of(c.model, c.room).empty()) break;
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

// One batch size's chosen chunking, solved.
struct BatchChoice {
  Candidate candidate;
  PlanSolution solution;
  StepPrediction prediction;          // with the stages on the device, once they are added
  std::vector<int> stages_on_device;  // add_stages_on_device's
  int tail_blocks = 0;                // add_tail_and_device_stages' choice
  int64_t tail_chunk = 0;             // and the tail's chunks (0: the candidate's)
  bool search_stopped = false;        // those two searches ran out of time
};

// The batch make_plan keeps (its rule is in planner.h): `solved` is in
// ascending batch order and not empty. Full chunks (min_chunk_sequences)
// run GEMMs near peak; a batch smaller than that does not qualify by being
// one whole chunk (its GEMMs are as small as a chunk of that size in a
// larger batch). A chunk the user gives (`given_chunk` > 0) fixes the
// chunk size, so then the batches that hold whole chunks of it qualify
// instead: a smaller batch would run as one smaller chunk than asked for.
const BatchChoice& choose_batch(const std::vector<BatchChoice>& solved, int64_t given_chunk) {
  // What rule 1 compares: the chunk (or, with a given chunk, the
  // batch) against a least size.
  const auto size_of = [&](const BatchChoice& c) {
    const CostModel& m = c.candidate.model;
    if (given_chunk > 0) return m.sizes.batch_size;
    return m.chunk_sequences > 0 ? m.chunk_sequences : m.sizes.batch_size;
  };
  const auto fastest_from = [&](int64_t least) {
    double best = 0;
    for (const BatchChoice& c : solved)
      if (size_of(c) >= least) best = std::max(best, c.prediction.tokens_per_s);
    return best;
  };
  int64_t least = 1;  // nothing qualifies: every batch
  if (given_chunk > 0) {
    if (fastest_from(given_chunk) > 0) least = given_chunk;
  } else {
    const int64_t full = min_chunk_sequences(solved.front().candidate.model.sizes.seq_len);
    const int64_t half = std::max<int64_t>(1, full / 2);
    const double best_full = fastest_from(full), best_half = fastest_from(half);
    if (best_full > 0 && best_full >= (1 - kSmallChunkAllowance) * best_half)
      least = full;
    else if (best_half > 0)
      least = half;
  }
  const double best = fastest_from(least);
  for (const BatchChoice& c : solved)
    if (size_of(c) >= least && c.prediction.tokens_per_s >= (1 - kBatchMargin) * best) return c;
  return solved.back();  // unreachable: the best considered one is within the margin
}

// The plan of one solved batch: its schedule, memory and prediction.
Plan plan_of(const models::ModelConfig& config, const HardwareProfile& hw, BatchChoice choice) {
  const Candidate& c = choice.candidate;
  Plan p;
  p.feasible = true;
  p.sizes = c.model.sizes;
  p.room = c.room;
  p.stage_times_from = c.model.stage_times_from;
  p.prediction = choice.prediction;
  p.solution = std::move(choice.solution);
  p.schedule.batch_size = c.model.sizes.batch_size;
  p.schedule.chunk_sequences = c.model.chunk_sequences;
  p.schedule.executor = exec::ExecutorKind::Streaming;
  p.schedule.boundaries = p.solution.placements;
  p.schedule.read_windows = p.solution.read_windows;
  p.schedule.read_splits = split_reads(p.solution);
  p.schedule.stages_on_device = choice.stages_on_device;
  p.schedule.tail_blocks = choice.tail_blocks;
  p.schedule.tail_chunk_sequences = choice.tail_blocks > 0 ? choice.tail_chunk : 0;
  p.search_stopped_at_limit = choice.search_stopped;
  p.budget = with_read_windows(config, hw, p.sizes, p.schedule);
  p.schedule.has_prediction = true;
  p.schedule.predicted_step_s = p.prediction.step_s;
  for (auto space : {exec::MemorySpace::Gpu, exec::MemorySpace::Host, exec::MemorySpace::Disk})
    p.schedule.predicted_peak_bytes[exec::memory_space_name(space)] = p.budget.bytes(space);
  return p;
}

// Note [Stages on the device] (exec/streaming_device_stages.cpp): the
// room the chosen schedule leaves on the GPU holds whole stages, tried in
// the forward's order (the embedding, the blocks, the head: the forward
// waits for the first ones' CPU updates first), each kept when the budget
// still fits and the predicted step gets shorter. A tied head reads the
// embedding, so it is kept only with the embed stage.
void add_stages_on_device(const models::ModelConfig& config, const HardwareProfile& hw,
                          BatchChoice& choice, Deadline deadline) {
  const int L = static_cast<int>(config.num_hidden_layers);
  // The solved schedule with the read windows that fit (plan_of's).
  const Plan solved = plan_of(config, hw, choice);
  CostModel m = choice.candidate.model;
  m.tail_blocks = choice.tail_blocks;
  use_tail_chunk(m, choice.tail_chunk);
  const PlanInstance instance = build_instance(m);
  const int64_t gpu_bytes = std::llround(hw.gpu_memory_gb * kBytesPerGB);
  choice.stages_on_device =
      exec::with_stages_on_device(
          solved.schedule, L, config.tie_word_embeddings,
          [&](const exec::Schedule& with) {
            if (passed(deadline)) {
              choice.search_stopped = true;
              return false;
            }
            if (exec::bytes_needed(config, solved.sizes, with).bytes(exec::MemorySpace::Gpu) >
                gpu_bytes)
              return false;
            m.stages_on_device = with.on_device(L);
            const StepPrediction prediction = predict_step(m, instance, solved.solution);
            if (prediction.step_s >= choice.prediction.step_s) return false;
            choice.prediction = prediction;
            return true;
          })
          .stages_on_device;
}

// Note [The fused tail] (exec/streaming_plan.cpp): when no boundary is
// offloaded, the last blocks and the head may run as one use. A longer
// tail takes GPU room (each block's saved activations for a chunk beside
// the head's working set) that stages on the device would use, and it
// shortens the forward that hides the CPU's updates, which those stages
// take off; so each tail length is tried with the stages on the device
// chosen for it, and with those chosen for no tail, while the tail alone
// still fits the budget; the shortest predicted step is kept (none: the
// head apart).
void add_tail_and_device_stages(const models::ModelConfig& config, const HardwareProfile& hw,
                                BatchChoice& choice, bool device_stages, bool fused_tail,
                                Deadline deadline) {
  BatchChoice stages_first = choice;
  if (device_stages) add_stages_on_device(config, hw, stages_first, deadline);
  BatchChoice best = stages_first;
  bool offloaded = false;
  for (exec::Placement p : choice.solution.placements)
    offloaded |= p == exec::Placement::Host || p == exec::Placement::Disk;
  const int L = static_cast<int>(config.num_hidden_layers);
  const int64_t gpu_bytes = std::llround(hw.gpu_memory_gb * kBytesPerGB);
  // Whether `with`, with its tail and stages on the device, fits the budget.
  const auto fits = [&](const BatchChoice& with) {
    const Plan planned = plan_of(config, hw, with);
    return exec::bytes_needed(config, planned.sizes, planned.schedule)
               .bytes(exec::MemorySpace::Gpu) <= gpu_bytes;
  };
  // `with`'s predicted step, with its tail and stages on the device (the
  // instance depends on neither); `priced`: the candidate's model with the
  // tail's chunks priced (use_tail_chunk).
  const PlanInstance instance = build_instance(choice.candidate.model);
  const auto predict = [&](const BatchChoice& with, const CostModel& priced) {
    CostModel m = priced;
    m.tail_blocks = with.tail_blocks;
    exec::Schedule kept;
    kept.stages_on_device = with.stages_on_device;
    m.stages_on_device = kept.on_device(L);
    return predict_step(m, instance, with.solution);
  };
  bool stopped = stages_first.search_stopped;
  // Note [The tail's own chunks] (exec/streaming_plan.cpp): the tail in the
  // candidate's chunks, then in halves of them down to smallest_tail_piece.
  const CostModel& cm = choice.candidate.model;
  const int64_t chunk = cm.chunk_sequences > 0 ? cm.chunk_sequences : cm.sizes.batch_size;
  std::vector<int64_t> tail_chunks = {0};
  for (int64_t piece = chunk / 2; piece >= smallest_tail_piece(cm.sizes.seq_len); piece /= 2)
    if (chunk % piece == 0) tail_chunks.push_back(piece);
  for (const int64_t tail_chunk : tail_chunks) {
    CostModel priced = cm;
    use_tail_chunk(priced, tail_chunk);
    bool stages_first_fit = true;
    for (int tail_blocks = 1; fused_tail && !offloaded && tail_blocks <= L; ++tail_blocks) {
      if (passed(deadline)) {
        stopped = true;
        break;
      }
      BatchChoice with = choice;
      with.tail_blocks = tail_blocks;
      with.tail_chunk = tail_chunk;
      // Each block more holds more: the first that does not fit ends the search.
      if (!fits(with)) break;
      with.prediction = predict(with, priced);
      if (device_stages) add_stages_on_device(config, hw, with, deadline);
      stopped = stopped || with.search_stopped;
      if (with.prediction.step_s < best.prediction.step_s) best = std::move(with);
      BatchChoice after = stages_first;
      after.tail_blocks = tail_blocks;
      after.tail_chunk = tail_chunk;
      stages_first_fit = stages_first_fit && fits(after);
      if (!stages_first_fit) continue;
      after.prediction = predict(after, priced);
      if (after.prediction.step_s < best.prediction.step_s) best = std::move(after);
    }
  }
  choice = std::move(best);
  choice.search_stopped = stopped;
}

}  // namespace

int64_t min_chunk_sequences(int64_t seq_len) {
  return seq_len <= 0 ? 1 : std::max<int64_t>(1, (kMinChunkTokens + seq_len - 1) / seq_len);
}

int64_t smallest_tail_piece(int64_t seq_len) {
  return std::max<int64_t>(1, min_chunk_sequences(seq_len) / 2);
}

int64_t default_chunk_sequences(int64_t batch_size, int64_t seq_len) {
  if (seq_len <= 0) return batch_size;  // no chunk reaches kMinChunkTokens
  for (int64_t m = min_chunk_sequences(seq_len); m <= batch_size; ++m)
    if (batch_size % m == 0) return m;
  return batch_size;
}

std::string chunk_past_sequences_line(std::string_view asked_by, int64_t asked, int64_t sequences,
                                      std::string_view of, std::string_view whole) {
  return fmt::format("{} {} is more than the {} sequences of {}: chunks of {}, the whole {}",
                     asked_by, asked, sequences, of, sequences, whole);
}

Plan make_plan(const models::ModelConfig& config, const HardwareProfile& hw, const PlanOptions& o) {
  LT_CHECK(o.seq_len > 0, "plan: --seq-len must be > 0, got ", o.seq_len);
  LT_CHECK(o.batch_size >= 0, "plan: --batch-size must be > 0 (or left out), got ", o.batch_size);
  LT_CHECK(config.num_hidden_layers >= 1, "plan: the model has no layers");
  // Note [The instance within the time limit] (milp.cpp); the first solve
  // gets at least a second (`share` below).
  const int64_t columns = milp_columns(config.num_hidden_layers, o.max_recompute);
  const double setup_s = static_cast<double>(columns) * kCbcSetupSecondsPerColumn;
  if (setup_s > std::max(1.0, o.time_limit_s)) {
    Plan plan;
    plan.shortages.push_back(
        {"gpu+host+disk", 0,
         fmt::format("not planned: the solver's instance for {} blocks (recompute runs of up to "
                     "{}) would have {} variables, growing with the square of the blocks; the "
                     "solver would need about {:.3g} s to set it up, past the time limit of {:g} s",
                     config.num_hidden_layers, o.max_recompute, columns, setup_s, o.time_limit_s)});
    return plan;
  }
  std::vector<int64_t> batches;
  if (o.batch_size > 0)
    batches.push_back(o.batch_size);
  else
    batches.assign(std::begin(kBatchCandidates), std::end(kBatchCandidates));

  // Note [Stages on the device]: not beside states on disk. With updates
  // during the backward both update there, each as its gradients land (Note
  // [Updates during the backward]).
  const bool states_on_disk =
      std::find(o.states_on_disk.begin(), o.states_on_disk.end(), true) != o.states_on_disk.end();
  const bool device_stages_allowed = o.stages_on_device && !states_on_disk;
  const bool fused_tail_allowed = o.fused_tail && !states_on_disk;
  std::vector<BatchChoice> solved;  // ascending batch sizes
  std::vector<Shortage> shortages;  // of the first batch that fails, when none was solved
  int64_t first_not_fitting = 0;
  double solve_s = 0;  // the solves' own seconds, as reported
  // The time limit is for the whole planning, from here.
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  for (size_t bi = 0; bi < batches.size(); ++bi) {
    const std::vector<Candidate> candidates = candidates_for(config, hw, o, batches[bi]);
    // The chunkings with no shortage, in order of preference; when none, the
    // shortages of the smallest chunk (the easiest to fit) are reported.
    std::vector<const Candidate*> fitting;
    for (const Candidate& c : candidates)
      if (shortages_of(c.model, c.room).empty()) fitting.push_back(&c);
    if (fitting.empty()) {
      // Larger batches only need more memory: stop at the first that fails.
      const Candidate& smallest = *std::min_element(
          candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
            return x.model.chunk_sequences < y.model.chunk_sequences;
          });
      if (solved.empty()) shortages = shortages_of(smallest.model, smallest.room);
      first_not_fitting = batches[bi];
      break;
    }
    std::optional<BatchChoice> batch_choice;
    double preferred_tokens_per_s = 0;  // the first chunking solved
    bool preferred_measured = false;    // at a chunk the profile timed
    // The preferred chunking gets this batch's whole share of the time left
    // (as when it was the only one); the others only what it leaves, so
    // trying them never costs a plan the preferred one would have found.
    // The searches after each solve (stages on the device, the fused tail)
    // end with the share too.
    const double share =
        std::max(1.0, (o.time_limit_s - elapsed_s()) / static_cast<double>(batches.size() - bi));
    const double batch_start = elapsed_s();
    const Deadline batch_deadline =
        started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(batch_start + share));
    std::string first_failure;  // why the preferred chunking found no placement
    for (size_t ci = 0; ci < fitting.size(); ++ci) {
      const Candidate& c = *fitting[ci];
      // Out of time: keep the plans so far.
      if ((!solved.empty() || batch_choice) && o.time_limit_s - elapsed_s() < 0.5) break;
      double limit = share;
      if (ci > 0) {
        const double left = share - (elapsed_s() - batch_start);
        if (left < 0.5) break;
        limit = left / static_cast<double>(fitting.size() - ci);
      }
      const PlanInstance instance = build_instance(c.model);
      PlanSolution solution = solve_milp(instance, limit);
      solve_s += solution.solve_s;
      if (!solution.feasible) {
        if (ci == 0) first_failure = why_unsolved(solution, instance, limit);
        continue;  // another chunking may do
      }
      BatchChoice choice{c, std::move(solution), {}, {}, 0};
      choice.prediction = predict_step(c.model, instance, choice.solution);
      // Chunkings (and batches) are compared with their stages on the
      // device: a larger chunk's faster forward leaves less time to hide
      // the CPU's updates behind, which the stages on the device take off it.
      // The fused tail takes GPU room too: the two are weighed together.
      add_tail_and_device_stages(config, hw, choice, device_stages_allowed, fused_tail_allowed,
                                 batch_deadline);
      const double tokens_per_s = choice.prediction.tokens_per_s;
      const double margin = preferred_measured && measured_chunk(hw, c) ? 0.0 : kChunkMargin;
      if (batch_choice && (tokens_per_s <= preferred_tokens_per_s * (1 + margin) ||
                           tokens_per_s <= batch_choice->prediction.tokens_per_s))
        continue;
      if (!batch_choice) {
        preferred_tokens_per_s = tokens_per_s;
        preferred_measured = measured_chunk(hw, c);
      }
      batch_choice = std::move(choice);
    }
    if (!batch_choice) {
      if (solved.empty()) shortages.push_back({"gpu+host+disk", 0, first_failure});
      break;
    }
    solved.push_back(std::move(*batch_choice));
  }
  Plan plan;
  if (solved.empty())
    plan.shortages = std::move(shortages);
  else
    plan = plan_of(config, hw, choose_batch(solved, o.chunk_sequences));
  plan.solve_s = solve_s;
  for (const BatchChoice& c : solved)
    plan.batches_tried.push_back({c.candidate.model.sizes.batch_size,
                                  c.candidate.model.chunk_sequences, c.prediction.tokens_per_s});
  plan.first_batch_not_fitting = first_not_fitting;
  return plan;
}

}  // namespace lt::plan
