#pragma once
// The cost model: per-stage times from a FLOP model at the profile's
// sustained GEMM rate, copy times from its bandwidths, and the PlanInstance
// (windows, capacities) the MILP is built from. It is the planner's model
// when it plans for a machine it is not running on; a measured run replaces
// the stage times when there is one.
#include <cstdint>
#include <string>
#include <vector>

#include "exec/memory_budget.h"
#include "models/config.h"
#include "plan/hardware.h"
#include "plan/instance.h"
#include "plan/milp.h"

namespace lt::plan {

struct CostModel {
  models::ModelConfig config;
  HardwareProfile hardware;
  exec::TrainSizes sizes;
  int64_t chunk_sequences = 0;  // sequences per chunk (0: the whole batch)
  int max_recompute = 8;
  // train.clip_with_previous_norm: the CPU updates (and the disk stages'
  // state traffic) start during the backward, as each stage's gradients
  // land (predict_update_pipeline_during_backward).
  bool updates_during_backward = false;
  // Per stage (empty: none): kept on the device (exec::Schedule::
  // stages_on_device): no upload, no gradient download, updated by the GPU
  // at the step's end instead of by the CPU.
  std::vector<bool> stages_on_device;
  // exec::Schedule::tail_blocks: the last blocks that train as resident
  // does (block_train_s), with no no-grad forward (Note [The fused tail],
  // exec/streaming_plan.cpp).
  int tail_blocks = 0;
  // exec::Schedule::tail_chunk_sequences (0: the tail runs the chunks of
  // the rest); set with use_tail_chunk, which prices the tail's blocks and
  // head at that size (tail_block_train_s, tail_head_step_s).
  int64_t tail_chunk_sequences = 0;
  bool stage_on_device(int stage) const {
    return static_cast<size_t>(stage) < stages_on_device.size() &&
           stages_on_device[static_cast<size_t>(stage)];
  }

  // Derived by make_cost_model, whole batch, from the profile's measured
  // stage_times when they are for this model and seq_len, else from FLOPs.
  double block_forward_s = 0;     // one block, no-grad forward
  double block_backward_s = 0;    // one block's backward use: forward under grad + backward,
                                  // without the output's GEMM (StageContext::output_unread)
  double block_train_s = 0;       // forward under grad + backward with the output computed,
                                  // as resident, offload and ZenFlow run a block
  double head_forward_s = 0;      // final norm + lm_head + loss, forward
  double head_step_s = 0;         // the head's forward + backward
  double embed_s = 0;             // the embed stage's forward and backward uses (FLOP model: 0)
  double tail_block_train_s = 0;  // block_train_s and head_step_s in the tail's chunks
  double tail_head_step_s = 0;    // (Note [The tail's own chunks]; equal when it has none)
  std::string stage_times_from;   // which, and why (printed by plan and exec.schedule: auto)
  double block_weight_gb = 0;     // one block's weight upload (bf16, or f32 masters)
  double block_gradient_gb = 0;   // one block's gradients (compute dtype)
  double boundary_gb = 0;         // one boundary activation, whole batch
};

// FLOPs of one forward pass, whole batch: 2 per parameter per token in the
// matmuls, plus causal attention's 2 * B * T^2 * heads * head_dim (QK^T and
// PV over the lower triangle). A backward costs twice the forward.
double block_forward_flops(const models::ModelConfig& c, const exec::TrainSizes& s);
double head_forward_flops(const models::ModelConfig& c, const exec::TrainSizes& s);
// The block's last GEMM (down_proj), which a backward use skips.
double block_output_gemm_flops(const models::ModelConfig& c, const exec::TrainSizes& s);

CostModel make_cost_model(const models::ModelConfig& config, const HardwareProfile& hardware,
                          const exec::TrainSizes& sizes, int64_t chunk_sequences,
                          int max_recompute);

// `m` with its fused tail run in chunks of `tail_chunk` sequences (0: the
// chunks of the rest).
void use_tail_chunk(CostModel& m, int64_t tail_chunk);

// Capacities per space left for boundaries, from the memory budget, the
// profile's sizes and its activation caps (GB; may be negative: short).
struct ActivationRoom {
  double gpu_gb = 0;       // kept GPU boundaries + recompute buffer
  double gpu_kept_gb = 0;  // cap on kept GPU boundaries (infinity when none)
  double host_gb = 0;
  double disk_gb = 0;
};
ActivationRoom activation_room(const CostModel& model);

PlanInstance build_instance(const CostModel& model);

// The predicted step, split as `lazytrain plan` prints it (seconds).
struct StepPrediction {
  double compute_s = 0;              // forward + backward, every stage once
  double recompute_s = 0;            // forward again over recomputed runs
  double exposed_weights_s = 0;      // weight and gradient streaming compute cannot hide
  double exposed_activations_s = 0;  // what offloading adds (the MILP's exposure)
  double optimizer_s = 0;            // CPU optimizer time the next forward cannot hide
  // The rate the CPU updates were priced at beside the forward's copies
  // (parameters a second): what to compare with the run's update spans.
  double cpu_update_params_per_s = 0;
  // The profile's in-run scale (HardwareProfile::cpu_adam_in_run_scale)
  // that rate includes: what it would be without, divided by it.
  double cpu_update_in_run_scale = 1;
  double device_updates_s = 0;  // the GPU's updates of the stages kept on it
  // What states on disk (TrainSizes::states_on_disk) add to it: the next
  // forward waiting for their reads and write-backs (included in
  // optimizer_s), and the disk's time on them a step (hidden or not).
  double exposed_state_disk_s = 0;
  double state_disk_busy_s = 0;
  double step_s = 0;
  double tokens_per_s = 0;
};
// The profile's cpu_adam(8bit)_in_run_scale for `optimizer`, within
// [0.25, 2] (1 when absent): a run's measurement, not a new machine.
double cpu_update_in_run_scale(const HardwareProfile& hw, exec::OptimizerStates optimizer);

StepPrediction predict_step(const CostModel& model, const PlanInstance& instance,
                            const PlanSolution& solution);

}  // namespace lt::plan
