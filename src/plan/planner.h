#pragma once
// make_plan: the whole planner. For each candidate batch size it picks the
// chunking (sequences per chunk through a stage), builds the cost model and the MILP instance,
// solves it with CBC and predicts the step; then it keeps one batch size by the rule at make_plan
// below; or, when nothing fits, says which space is short and by how much.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "exec/memory_budget.h"
#include "exec/schedule.h"
#include "models/config.h"
#include "plan/cost_model.h"
#include "plan/hardware.h"
#include "plan/milp.h"

namespace lt::plan {

struct PlanOptions {
  int64_t batch_size = 0;  // 0: the planner chooses
  int64_t seq_len = 1024;
  int64_t chunk_sequences = 0;  // sequences per chunk through a stage; 0: the planner chooses
  // Sequences per micro-batch (train.grad_accum > 1): the executor splits
  // each micro-batch into chunks and never joins two, so a chunk the
  // planner chooses divides it. 0: the whole batch.
  int64_t micro_batch = 0;
  int max_recompute = 8;  // largest number of blocks between two kept boundaries
  // For the whole planning: the cost models, building and solving each
  // instance, and the searches after a solve (stages on the device, the
  // fused tail), which stop there with what they have found.
  double time_limit_s = 30;
  exec::OptimizerStates optimizer = exec::OptimizerStates::Fp32;
  int64_t compute_bytes = 2;       // exec::TrainSizes::compute_bytes: 4 for the CPU stand-in
  bool on_gpu = true;              // false: the CPU stand-in
  int64_t optimizer_block = 2048;  // adamw8bit: optim.block_size
  // exec::TrainSizes::states_on_disk: stages whose masters and optimizer
  // states live on disk (plan/state_placement.h); empty: none.
  std::vector<bool> states_on_disk;
  bool f32_weight_uploads = false;       // exec::TrainSizes::f32_weight_uploads
  bool updates_during_backward = false;  // CostModel::updates_during_backward
  // Whether the plan may keep stages on the device (exec::Schedule::
  // stages_on_device) in the room its schedule leaves: not with states on
  // disk, updates during the backward, or several processes.
  bool stages_on_device = true;
  // Whether the plan may fuse the last blocks with the head (exec::
  // Schedule::tail_blocks) when every boundary stays on the GPU or is
  // recomputed: not with states on disk, updates during the backward, or
  // several processes.
  bool fused_tail = true;
};

struct Shortage {
  std::string space;  // "gpu", "host", or "gpu+host+disk" for boundary activations
  int64_t bytes = 0;  // how many more bytes that space would need
  std::string detail;
};

// A batch size the planner solved: its chosen chunking and prediction.
struct BatchTried {
  int64_t batch_size = 0;
  int64_t chunk_sequences = 0;
  double tokens_per_s = 0;
};

struct Plan {
  bool feasible = false;
  exec::TrainSizes sizes;
  exec::Schedule schedule;    // with predictions when feasible
  exec::MemoryBudget budget;  // bytes_needed of the schedule
  StepPrediction prediction;
  PlanSolution solution;
  ActivationRoom room;
  std::string stage_times_from;  // the cost model's stage times: measured or the FLOP model
  double solve_s = 0;            // every solve, all candidates
  // The search for stages on the device and a fused tail stopped at the
  // time limit (PlanOptions::time_limit_s): a longer one may find a faster step.
  bool search_stopped_at_limit = false;
  std::vector<Shortage> shortages;  // when infeasible: for the easiest candidate
  // Every batch size solved, ascending (one when the batch was given); the
  // first larger one that did not fit, 0 when none failed.
  std::vector<BatchTried> batches_tried;
  int64_t first_batch_not_fitting = 0;
};

// The chunk the executor should take through a stage for `batch_size` sequences: the
// smallest divisor whose chunk has >= kMinChunkTokens tokens (GEMMs that
// small already run near peak), or the whole batch if none does.
inline constexpr int64_t kMinChunkTokens = 8192;
// The fewest sequences of `seq_len` tokens that make kMinChunkTokens (>= 1).
int64_t min_chunk_sequences(int64_t seq_len);
// The fewest sequences a piece of the fused tail may have (Note [The tail's
// own chunks]): half of min_chunk_sequences. A tail block holds its saved
// activations for one piece, so halving the piece doubles the tail that fits
// (on the 3B at 24 GB, pieces of 4 hold 0.56 GB a block where 8 hold 1.1 GB),
// and each block in the tail is one block less run twice. GEMMs of 4096
// tokens cost the 3B 1-4% more a sequence than 8192 on the H200: a price the
// profile measures (its half chunk, default_stage_batch_sizes), not guesses.
int64_t smallest_tail_piece(int64_t seq_len);
int64_t default_chunk_sequences(int64_t batch_size, int64_t seq_len);
// The line `plan` and `train` say when the chunk asked for (`asked_by`
// `asked`: --micro-batch, exec.micro_batch) is more than the `sequences`
// it cuts (`of`, e.g. "--batch-size"): the executor splits each batch or
// micro-batch, never joins two, so it runs as one chunk of them all
// (`whole`: "batch" or "micro-batch").
std::string chunk_past_sequences_line(std::string_view asked_by, int64_t asked, int64_t sequences,
                                      std::string_view of, std::string_view whole);
// Chunkings the planner tries above the default: up to this many times it
// (and default_stage_batch_sizes times chunks that large).
inline constexpr int64_t kMaxChunkGrowth = 4;

// Batch sizes tried when the user gives none (ascending): powers of two and
// the steps between them, up to where weight streaming and the CPU
// optimizer are hidden for the largest models we plan for.
inline constexpr int64_t kBatchCandidates[] = {1,  2,  4,   8,   16,  24,  32, 48,
                                               64, 96, 128, 192, 256, 384, 512};
// The planner keeps the smallest batch predicted within this share of the
// most tokens/s (rule 2 below). Past the point where compute hides
// the weight streaming and the CPU optimizer, a larger batch buys only a
// few percent (and the prediction is itself a few percent off: a fitted
// line, or FLOPs that do not see GEMM efficiency), while it costs optimizer
// steps per token (slower convergence per token) and host memory.
inline constexpr double kBatchMargin = 0.03;

// How much faster a batch whose chunks are smaller must be predicted before
// rule 1 below gives way: what such chunks may lose to GEMM efficiency that
// the cost model does not see (on the H200, chunks of 4 ran 3.5-4.6% slower
// per sequence than chunks of 8 at the 3B and 7B shapes, where a fitted
// line had predicted them faster).
inline constexpr double kSmallChunkAllowance = 0.10;

// With options.batch_size == 0 the planner chooses the batch size: "the
// largest batch that meets memory and keeps compute dominant", read as
//  1. Prefer the feasible batches whose chosen chunking has at least
//     min_chunk_sequences(seq_len) sequences per chunk ("full" chunks):
//     their GEMMs run near peak, as the cost model assumes. A smaller batch,
//     one whole chunk, does not qualify (its GEMMs are as small). When the
//     best of them is predicted more than kSmallChunkAllowance slower than
//     the best batch in chunks of at least half that, or none has full
//     chunks, take those with chunks of at least half instead (memory may
//     allow full chunks only at small batches: the 7B shape in 7.55 GB fit
//     them up to batch 24, and batch 64 in chunks of 4 was predicted 53%
//     faster); when none has those either, all batches.
//     (Maximizing predicted tokens/s alone drives the batch to hundreds of
//     sequences in chunks of one, which runs GEMMs far below peak; neither
//     the FLOP model nor stage times see that: these hold a chunk below the
//     smallest size timed to that size's rate per sequence. Above it they
//     do see GEMM efficiency, up to the largest chunk the planner tries, so
//     larger chunks win on their predictions alone.)
//  2. Among those, take the smallest batch predicted within kBatchMargin of
//     the most tokens/s among them.
// Batches are tried in ascending order and the search stops at the first
// one that does not fit (larger ones need only more memory). A batch_size
// the user gives is planned alone; with a chunk_sequences the user gives, rule 1
// is instead: the batches that hold at least one whole chunk of it (all
// when none does), whatever the others are predicted to do.
Plan make_plan(const models::ModelConfig& config, const HardwareProfile& hardware,
               const PlanOptions& options);

}  // namespace lt::plan
