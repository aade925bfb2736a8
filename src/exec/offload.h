#pragma once
// The offload executor (docs/design.md, "Executors"; issue 20): the compute
// weights stay resident on the device for the whole run, and the f32
// masters and the optimizer state stay in host memory.
//
// Synchronous (ZeRO-Offload): every step runs forward and backward on the
// resident weights, copies each stage's gradients to host slabs, and then
// the CPU optimizer updates the masters stage by stage; each stage's new
// weights are uploaded (from the bf16 shadow the update pass writes) as
// soon as its update is done, and the step ends when all have landed.
//
// ZenFlow (arXiv 2505.12242; docs/design.md says what is ours): for each
// 2-D weight [out, in] the top `topk_ratio` of its input columns, by the L1
// norm of their gradient, are updated on the device at every step, with
// f32 masters and AdamW moments for those columns only; 1-D parameters are
// always updated there. The other columns' gradients accumulate on the
// device, in the gradients' own dtype, over a window of `update_interval`
// steps; at the window's end they are copied to pinned host memory once,
// and the CPU optimizer applies their mean to the whole f32 master. With
// `overlap_step` that update runs beside the next window's steps and its
// result reaches the device weights at the end of that window (one window
// late); the device keeps its own values in the columns it owns. See
// Note [ZenFlow's window] in offload_zenflow.cpp for the order of events
// and the choices (clipping, the auto rules) that are ours.
//
// The device is a StreamingDevice: the CPU stand-in in tests (copies on
// worker threads, f32 compute), a GPU in a run (bf16 compute, pinned host
// buffers, copy streams).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exec/cross_rank_sum.h"
#include "exec/executor.h"
#include "exec/stage_state_file.h"
#include "exec/streaming_device.h"
#include "exec/zenflow_policy.h"
#include "models/causal_lm.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"

namespace lt::exec {

class ZeroOptimizer;

struct OffloadOptions {
  bool zenflow = false;  // else the synchronous offload
  ZenFlowOptions zenflow_options;
  // ZenFlow's device-side AdamW over the columns it owns: the host
  // optimizer's settings (optim.*), whatever that optimizer's states are.
  optim::AdamWOptions adam;
  std::vector<std::string> no_decay;
  // Data parallel (exec/offload_ranks.cpp; the synchronous offload): the
  // ranks to sum each stage's gradients over as the backward makes them
  // final (null: one process), and with ZeRO-1 (dist.zero 1) the sharded
  // optimizer, one group per stage (streaming_zero_groups), which is also
  // the executor's `optimizer`. Both outlive the executor.
  CrossRankSum* ranks = nullptr;
  ZeroOptimizer* zero = nullptr;
  // Test hook: the optimizer thread sleeps up to this many microseconds
  // before each task, to shake out a step that does not wait for it.
  int64_t max_optimizer_delay_us = 0;
  // Test hook: false takes a window's gradients after its last backward,
  // not during it (Note [ZenFlow's early download]); the values are the same.
  bool early_download = true;
  // exec.state_placement, per stage of model.stages() (embed, blocks,
  // head): true keeps that stage's f32 masters and optimizer states in a
  // scratch file in `state_file.directory` (exec.disk_path) between its
  // updates, read ahead of them and written back behind them (Note
  // [Offload states on disk], offload_states.cpp). Empty: none.
  std::vector<bool> states_on_disk;
  StageStateFile::Options state_file;
  // With states on disk: the destructor reads every stage back, so that
  // the model (which outlives the executor) is whole; false leaves them
  // (the trainer, done with the model).
  bool read_states_back_at_end = true;
  // The start of a model whose disk stages' masters were made without
  // memory (CausalLM::random and uninitialized with flags): writes the f32
  // masters of disk stage `stage` once the executor has given them memory,
  // on its states thread, while it is built; the stage is then written
  // out and freed (Note [Stage states on disk], "the start"). Unset: every
  // master has memory.
  std::function<void(size_t stage)> fill_masters;
  // Test hook: the states thread sleeps up to this many microseconds
  // before each read and write-back (a slow disk).
  int64_t max_state_io_delay_us = 0;
};

class OffloadExecutor final : public Executor {
 public:
  // `model`: the f32 masters on the host; `optimizer` was built over
  // model.parameters() in that order and runs on the host.
  OffloadExecutor(const models::CausalLM& model, optim::Optimizer& optimizer,
                  std::unique_ptr<StreamingDevice> device, OffloadOptions options);
  ~OffloadExecutor() override;
  OffloadExecutor(const OffloadExecutor&) = delete;
  OffloadExecutor& operator=(const OffloadExecutor&) = delete;

  StepStats step(const std::vector<data::Batch>& micro_batches,
                 const StepOptions& options) override;
  // Waits for the updates and copies in flight. The device weights are
  // then current (evaluation reads them); ZenFlow's host masters may still
  // lack its device-owned columns and its open window: sync_masters().
  // With states on disk, the disk stages' masters and states stay there
  // (sync_masters() reads them back).
  void sync() override;
  // ZenFlow: ends the open window now (its gradients go through the CPU
  // update at once), applies every pending update and writes the device's
  // columns into the host masters, so that the masters and the optimizer
  // state hold everything trained so far (a checkpoint). The device keeps
  // its columns and their moments (checkpoint_state() saves them). With
  // states on disk, every stage is read back into host memory (the next
  // step writes them out again).
  void sync_masters() override;
  // With states on disk: waits as sync_masters() does, leaving the disk
  // stages there (exec/staged_states.h); else null.
  StagedStates* sync_staged() override;
  void resume_at(int64_t step) override;
  // ZenFlow: the device's columns and their moments (Note [ZenFlow's
  // saves], exec/offload_zenflow_state.cpp).
  optim::NamedTensors checkpoint_state() const override;
  std::string restore_checkpoint_state(const optim::NamedTensors& saved) override;
  const char* name() const override { return options_.zenflow ? "zenflow" : "offload"; }
  // The device weights (bf16 on a GPU): the model as it computes.
  const models::CausalLM& eval_model() const override;

 private:
  struct Impl;
  OffloadOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lt::exec
