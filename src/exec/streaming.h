#pragma once
// The streaming executor (docs/design.md, "Executors"; issue 7): the fp32 master
// weights and the optimizer stay in host memory, and each stage's weights
// are copied to the device only while that stage runs.
//
// - Two device weight slots: while one stage computes, the next stage's
//   weights are copied into the other slot on the upload engine.
// - Forward takes the whole global batch through a stage (in chunks of
//   Schedule::chunk_sequences sequences) before the next stage. Each boundary
//   activation is kept on the device, offloaded to host memory, or dropped
//   and recomputed in backward, as the Schedule says.
// - Backward walks the stages in reverse; each stage's gradients go to host
//   gradient slabs on the download engine, which also adds the stage's
//   squared gradient sum, so the global norm is known when the last stage
//   lands (no pass over all gradients).
// - The optimizer updates stage by stage on its own thread, once the norm is
//   known. Those updates overlap the next step's forward: the forward of
//   stage i (and the upload of its weights) waits only for stage i's update.
//   sync() waits for all of them.
//
// StepStats: compute_s and recompute_s are the stages' own run times;
// exposed_h2d_s / exposed_d2h_s are the compute thread's waits for copies;
// optimizer_s is its wait for updates (the exposed part only, since updates
// overlap the next step); bubbles_s is the rest of the step's wall time.
// Peaks: "host" (the host heap) and the device's memory space ("device" on
// the stand-in).
//
// A stage computes with the device copy through a binding: for the stage's
// run, the model's own parameter tensors point at the device slot's memory,
// so the stage code (and autograd's gradient accumulation into .grad) is
// the same code the resident executor runs.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exec/cross_rank_sum.h"
#include "exec/executor.h"
#include "exec/schedule.h"
#include "exec/stand_in_device.h"
#include "exec/streaming_disk.h"
#include "exec/streaming_plan.h"
#include "models/causal_lm.h"
#include "optim/optimizer.h"

namespace lt::exec {

class ZeroOptimizer;

struct StreamingOptions {
  Schedule schedule;  // boundaries must match the model; see exec/schedule.h
  // Pipeline the optimizer with the next step's forward (else every step
  // ends with its update done).
  bool overlap_optimizer = true;
  // When set, the first `trace_steps` steps are recorded (compute, copies,
  // optimizer) and written there in the Chrome trace format at the start
  // of step trace_steps + 2 and by sync().
  std::string trace_path;
  int trace_steps = 3;
  // Test hook: the optimizer thread sleeps up to this many microseconds
  // before each stage's update, to shake out a forward that does not wait.
  int64_t max_optimizer_delay_us = 0;
  // Test hook: the same for each read and write-back of states on disk (a
  // slow disk).
  int64_t max_state_io_delay_us = 0;
  // Where boundaries placed on disk go (exec/streaming_disk.h); the
  // directory is needed only when the schedule places one there.
  DiskSpillOptions disk;
  // exec.state_placement, per stage of model.stages() (embed, blocks,
  // head): true puts that stage's f32 masters and optimizer states in a
  // scratch file in disk.directory (the activations' file options), in host
  // memory only around the stage's update (Note [Stage states on disk]).
  // Empty, or every entry false: all in host memory.
  std::vector<bool> states_on_disk;
  // With states on disk: the destructor reads every stage back, so that the
  // model (which outlives the executor) is whole. False leaves a disk
  // stage's parameters without memory: for a caller done with the model,
  // whose masters and states may not fit host memory together (the
  // trainer).
  bool read_states_back_at_end = true;
  // The start of a model whose disk stages' masters were made without
  // memory (CausalLM::random and uninitialized with flags; the trainer):
  // writes the f32 masters of disk stage `stage` (model.stages() index)
  // into its parameters, which the executor has just given memory, on the
  // executor's states thread. The executor then fills the device's upload
  // copies, writes the stage out and frees it, a stage at a time (Note
  // [Stage states on disk], "the start"). Called only while the executor
  // is built. Unset: every master has memory.
  std::function<void(size_t stage)> fill_masters;
  // Test hook: called on the compute thread at the two points of each stage
  // use that device_holds describes (exec/streaming_plan.h), with the use's
  // index in stage_uses(): before it computes (`computed` false) and after.
  std::function<void(size_t use, bool computed)> observe_use;
  // Data parallel (exec/streaming_ranks.cpp; MPI on the CPU, NCCL on GPUs): the ranks
  // to sum each stage's gradients over, as its backward ends (null: one
  // process). Outlives the executor.
  CrossRankSum* ranks = nullptr;
  // With `ranks`, ZeRO-1 (dist.zero 1): the optimizer, sharded with one
  // group per stage (streaming_zero_groups); each stage's gradients are
  // reduce-scattered instead of summed, and the updated masters
  // all-gathered before step() returns. Null: every rank updates all.
  ZeroOptimizer* zero = nullptr;
};

// ZeRO-1's groups for the streaming and offload executors: each stage's first parameter
// (stages without parameters left out), for ZeroOptimizer.
std::vector<size_t> streaming_zero_groups(const models::CausalLM& model);

class StreamingExecutor final : public Executor {
 public:
  // `optimizer` must have been built over model.parameters() in that order.
  StreamingExecutor(const models::CausalLM& model, optim::Optimizer& optimizer,
                    StreamingDevice& device, StreamingOptions options);
  // The same, owning its device.
  StreamingExecutor(const models::CausalLM& model, optim::Optimizer& optimizer,
                    std::unique_ptr<StreamingDevice> device, StreamingOptions options);
  ~StreamingExecutor() override;
  StreamingExecutor(const StreamingExecutor&) = delete;
  StreamingExecutor& operator=(const StreamingExecutor&) = delete;

  StepStats step(const std::vector<data::Batch>& micro_batches,
                 const StepOptions& options) override;
  void sync() override;
  StagedStates* sync_staged() override;
  const char* name() const override { return "streaming"; }
  const models::CausalLM& eval_model() const override { return model_; }
  const std::vector<StageUse>& stage_uses() const;

 private:
  struct Impl;
  void wait_for_updates();         // sync()'s wait, the states left where they are
  const models::CausalLM& model_;  // the f32 masters, on the host
  std::unique_ptr<StreamingDevice> owned_device_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lt::exec
