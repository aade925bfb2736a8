#pragma once
// The offload executor's state, private to its source files: offload.cpp
// builds it and runs the synchronous step; offload_zenflow.cpp runs
// ZenFlow's step. exec/offload.h says what the executor does.
//
// Teardown (as Note [Streaming teardown order]): tasks on the optimizer
// thread read the masters, slabs and optimizer, and copies on the device's
// engines read the slabs and device weights; ~Impl waits for all of them,
// and the optimizer queue, declared last, stops first.
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/forward_backward.h"
#include "exec/offload.h"
#include "exec/stage_states_on_disk.h"
#include "exec/staged_states.h"
#include "exec/work_queue.h"
#include "optim/adamw.h"
#include "optim/grad_norm_partials.h"

namespace lt::exec {

struct OffloadExecutor::Impl {
  // One parameter's device-owned columns (ZenFlow). A 1-D parameter, or a
  // weight whose every column is selected, is `whole`: the device updates
  // all of it and the CPU none.
  struct Columns {
    bool whole = false;
    std::vector<int32_t> host;  // selected columns, ascending
    Tensor device;              // the same, i32 on the device
    Tensor master;              // f32 [rows, k] on the device: their master values
  };

  // ---- fixed at construction ----
  const models::CausalLM& model;  // the f32 masters, on the host
  optim::Optimizer& optimizer;
  std::unique_ptr<StreamingDevice> device;
  const OffloadOptions options;
  std::optional<models::CausalLM> compute;  // the device weights
  std::vector<std::string> names;
  std::vector<Tensor> masters;  // model.parameters(), in order
  std::vector<Tensor> weights;  // compute's parameters, same order
  struct StageRange {
    size_t first = 0, last = 0;
  };
  std::vector<StageRange> stages;
  // Host gradients in the device's compute dtype (pinned on a GPU): one
  // set for the synchronous step, two (one per window in flight) for ZenFlow.
  std::vector<Tensor> slabs[2];
  std::vector<char>
      slab_filled[2];  // per parameter: the last download into the set copied a gradient
  std::unique_ptr<optim::GradNormPartials> norm;  // over `weights`

  // ---- the pipeline ----
  std::vector<Ticket> uploaded;  // per stage: its latest weight upload
  Ticket cpu_update;             // the latest CPU update (ZenFlow), or ready
  int64_t steps = 0;             // steps run

  // ---- ZenFlow ----
  std::vector<Columns> columns;               // per parameter (empty until the first selection)
  nn::NamedParameters selected;               // Columns::master of each parameter, named as it
  std::unique_ptr<optim::AdamW> device_adam;  // over `selected`
  std::unique_ptr<optim::GradNormPartials> selected_norm;
  int64_t window_steps = 0;         // steps accumulated in the open window
  double window_lr = 0;             // the open window's last step's rate
  double window_max_grad_norm = 0;  // and its clipping threshold
  bool merge_due = false;           // cpu_update's result is not on the device yet
  bool rescatter_due = false;       // an upload overwrote device-owned columns
  int64_t next_select_step = 0;     // reselect at the first window start from here
  // Note [ZenFlow's saves]: a checkpoint's columns and device moments,
  // taken by the first selection after a resume instead of a new choice.
  struct SavedSelection {
    std::vector<std::vector<int32_t>> columns;  // per parameter
    optim::NamedTensors device_state;           // device_adam's, as it names them
    int64_t next_select_step = 0;
  };
  std::optional<SavedSelection> saved_selection;
  optim::NamedTensors zenflow_state() const;
  std::string take_zenflow_state(const optim::NamedTensors& saved);
  int buffer = 0;  // the slab set the next window's download fills
  // Note [ZenFlow's early download]: set for the last backward of a
  // synchronous step, or of a ZenFlow step that ends a window known in
  // advance; per parameter, whether its gradient was taken there (ZenFlow:
  // device columns gathered and zeroed, the rest downloading).
  bool take_early = false;
  bool zen_step = false;  // the step being run is a ZenFlow step (not warm-up or offload)
  std::vector<char> taken_early;
  // The last window's downloads; the device's gradients are dropped once
  // they have landed, before the next backward makes new ones.
  std::vector<Ticket> pending_downloads;
  bool drop_due = false;
  // Note [ZenFlow's early merge]: set for the last backward of a window
  // whose end merges the previous window's CPU update; per parameter,
  // whether its merge upload is queued already; the parameters taken but
  // not yet queued (sent in batches), and the uploads queued.
  bool merging_early = false;
  std::vector<char> merged_early;
  std::vector<size_t> early_merge_batch;
  int64_t early_merge_batch_bytes = 0;
  std::vector<Ticket> early_merge_uploads;
  StepStats* stats = nullptr;  // the step being run

  // ---- exec.state_placement (offload_states.cpp) ----
  std::vector<size_t> disk_stages;  // ascending
  bool states_on_disk = false;      // every disk stage evicted (compute thread)
  // Per stage, its last read and write-back in an update (states thread,
  // before their tickets complete), for StepStats::states_read_*.
  std::vector<StageStatesOnDisk::Io> state_reads, state_writes;
  // When disk_stages is not empty; its I/O runs on state_queue, which
  // stops (running what is queued) before it goes.
  std::unique_ptr<StageStatesOnDisk> disk_states;
  WorkQueue state_queue{"states"};
  std::unique_ptr<StagedStates> staged;  // over disk_states

  // Last: stops (running what is queued) while everything above exists.
  WorkQueue optimizer_queue{"optimizer"};

  Impl(const models::CausalLM& m, optim::Optimizer& o, std::unique_ptr<StreamingDevice> d,
       OffloadOptions opts);
  ~Impl();

  // ---- offload.cpp ----
  // One step's bookkeeping, shared by run_step and run_step_over_ranks:
  // while it lives the peaks count from its start and `stats` is the
  // step's record; finish() fills in the step's time, bubbles and peaks.
  class StepRecord {
   public:
    StepRecord(Impl& impl, StepStats& st);
    ~StepRecord() { impl_.stats = nullptr; }
    StepRecord(const StepRecord&) = delete;
    StepRecord& operator=(const StepRecord&) = delete;
    void finish();

   private:
    Impl& impl_;
    StepStats& st_;
    std::chrono::steady_clock::time_point start_;
  };
  StepStats run_step(const std::vector<data::Batch>& micro_batches, const StepOptions& o);
  // Whether the coming step is ZenFlow's (its warm-up steps are the
  // synchronous offload's).
  bool zenflow_step() const {
    return options.zenflow && steps >= options.zenflow_options.full_warm_up_rounds;
  }
  // ---- offload_ranks.cpp: data parallel, with or without ZeRO-1 ----
  StepStats run_step_over_ranks(const std::vector<data::Batch>& micro_batches,
                                const StepOptions& o);
  // Note [Offload reduces behind the backward]: each stage's gradients are
  // reduced over the ranks as the last backward makes them final.
  struct StartedReduce {
    size_t stage = 0;
    std::vector<Tensor> grads;  // all-reduce: the sums' device tensors
    Tensor shard;               // ZeRO-1: this rank's shard of the sums
  };
  std::deque<StartedReduce> reducing;  // oldest first
  std::vector<size_t> stage_of;        // per parameter (set with the hooks)
  std::vector<size_t> stage_waiting;   // per stage: gradients not yet final
  size_t stages_started = 0;           // from the last stage down
  bool reduces_armed = false;          // the coming backward makes every gradient final
  std::vector<char> has_grad;          // per parameter: a gradient on this rank
  void arm_reduces();
  void gradient_ready(size_t i);
  // Starts the reduce of stage `s` (this rank adds zeros for a parameter
  // without a gradient), then finishes all but it.
  void start_stage_reduce(size_t s);
  // Waits for the oldest reduce and queues its sums' download (all-reduce:
  // into the slabs; ZeRO-1: its shard into the optimizer's).
  void finish_oldest_stage_reduce();
  // The global batch's target count (a collective).
  int64_t targets_over_ranks(const std::vector<data::Batch>& micro_batches);
  // Note [ZenFlow over ranks]: after a ZenFlow step's backward, the loss,
  // tokens and every gradient summed over the ranks, in place.
  void sum_zenflow_step_over_ranks(int64_t targets);
  // ... and after its update, on every rank but rank 0, the gradients
  // left to accumulate over the window zeroed.
  void keep_window_sums_on_rank_zero();
  // ... and before a window ends between steps (a save, an evaluation's
  // sync): every rank given rank 0's sums (a collective, as every rank
  // syncs at the same step).
  void sum_window_over_ranks();
  // Forward and backward on the device weights; returns the squared norm
  // of the gradients when `norm` is given (else 0).
  // `targets_over_ranks`: the loss's denominator over every rank (0: this
  // process's own targets).
  double forward_backward_on_device(const std::vector<data::Batch>& micro_batches,
                                    optim::GradNormPartials* partials,
                                    const BackwardHooks& hooks = {},
                                    int64_t targets_over_ranks = 0);
  // The synchronous step's second half: gradients to the host, the CPU
  // update stage by stage, each stage's upload after its update.
  void synchronous_update(const StepOptions& o);
  // Copies the gradients of parameters [first, last) to slab set `set`
  // (slab_filled says which had one).
  // (Only those `include` accepts, when given.)
  Ticket download_gradients(size_t first, size_t last, int set, const std::string& label,
                            const std::function<bool(size_t)>& include = {});
  // Queues the CPU update of parameters [first, last) from slab set `set`
  // (those slab_filled), after `after`.
  Ticket update_on_host(size_t first, size_t last, int set, double lr, double scale, Ticket after);
  // Queues the upload of the new values of parameters [first, last) that
  // `include` accepts, after `after`.
  Ticket upload_weights(size_t first, size_t last, Ticket after, const std::string& label,
                        const std::function<bool(size_t)>& include = {});
  // The same for the listed parameters.
  Ticket upload_weights(const std::vector<size_t>& params, Ticket after, const std::string& label);
  void wait_uploads();
  // Waits for pending_downloads and drops the device's gradients they read.
  void settle_downloads();
  void drop_device_gradients();

  // ---- offload_zenflow.cpp ----
  void zenflow_update(const StepOptions& o);
  void select_columns();
  // Ends the open window: its gradients to the host and the CPU update
  // queued (and, without overlap_step, applied).
  void end_window();
  // Waits for the pending CPU update and uploads its result.
  void merge_cpu_update();
  // Writes the device-owned columns' master values into the host masters.
  void write_back_columns();
  // Puts the device-owned columns' values back into the device weights
  // after an upload overwrote them.
  void rescatter_columns();
  std::vector<ColumnMass> column_masses() const;
  // Whether this step ends a window that update_interval fixes, with the
  // device's columns already chosen (so they can be taken as gradients
  // become final).
  bool window_end_known() const;
  // The grad-ready hook's work for parameter i while take_early is set.
  void take_gradient_early(size_t i);
  // Note [ZenFlow's early merge]: arms it for the coming last backward
  // when this step's window end merges a CPU update; queues parameter i's
  // merge upload once its gradient is final; sends the batch collected.
  void begin_early_merge();
  void merge_early(size_t i);
  void flush_early_merge();
  void finish_masters();

  // ---- offload_states.cpp (Note [Offload states on disk]) ----
  void setup_state_placement();
  // Every master and optimizer state has memory, or belongs to a disk stage.
  void check_states_have_memory() const;
  // The reads and write-backs of the update waited for into `stats`.
  void count_state_io();
  bool stage_on_disk(size_t stage) const;  // now, between steps
  // What an upload of parameter i copies: its master, or for a disk stage
  // the copy that stays in host memory.
  const Tensor& upload_source(size_t i) const;
  // Every disk stage to disk (before a step) or back (sync()).
  void move_all_states(bool to_disk);
  // The CPU update of every stage from slab set `set`, the disk stages'
  // reads and write-backs around theirs; `then(s, done)` gets each stage's
  // last ticket (its update, or its write-back). Returns the update of the
  // last stage queued on the optimizer thread.
  void update_stages(int set, double lr, double scale,
                     const std::function<void(size_t, Ticket)>& then);
  // ZenFlow's columns: each stage's masters, read from disk for a disk
  // stage; `write` puts a disk stage's back after fn changed them.
  void with_stage_masters(bool write,
                          const std::function<void(size_t, const std::vector<Tensor>&)>& fn);
};

}  // namespace lt::exec
