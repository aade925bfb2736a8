#pragma once
// make_plan: the whole planner. For each candidate batch size it picks the
// micro-batch chunking, builds the cost model and the MILP instance, solves
// it with CBC, predicts the step, and keeps the plan with the most
// predicted tokens per second; or, when nothing fits, says which space is
// short and by how much.
#include <cstdint>
#include <string>
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
  int64_t micro_batch = 0;   // 0: the planner chooses
  int max_recompute = 8;     // largest number of blocks between two kept boundaries
  double time_limit_s = 30;  // for all the solves together
  exec::OptimizerStates optimizer = exec::OptimizerStates::Fp32;
  int64_t compute_bytes = 2;  // exec::TrainSizes::compute_bytes: 4 for the CPU stand-in
};

struct Shortage {
  std::string space;  // "gpu", "host", or "gpu+host+disk" for boundary activations
  int64_t bytes = 0;  // how many more bytes that space would need
  std::string detail;
};

struct Plan {
  bool feasible = false;
  exec::TrainSizes sizes;
  exec::Schedule schedule;    // with predictions when feasible
  exec::MemoryBudget budget;  // bytes_needed of the schedule
  StepPrediction prediction;
  PlanSolution solution;
  ActivationRoom room;
  std::string stage_times_from;     // the cost model's stage times: measured or the FLOP model
  double solve_s = 0;               // every solve, all candidates
  std::vector<Shortage> shortages;  // when infeasible: for the easiest candidate
};

// The micro-batch the executor should use for `batch_size` sequences: the
// smallest divisor whose chunk has >= kMinChunkTokens tokens (GEMMs that
// small already run near peak), or the whole batch if none does.
inline constexpr int64_t kMinChunkTokens = 8192;
// The fewest sequences of `seq_len` tokens that make kMinChunkTokens (>= 1).
int64_t min_chunk_sequences(int64_t seq_len);
int64_t default_micro_batch(int64_t batch_size, int64_t seq_len);

Plan make_plan(const models::ModelConfig& config, const HardwareProfile& hardware,
               const PlanOptions& options);

}  // namespace lt::plan
