#pragma once
// The streaming executor's state, private to its two source files:
// streaming.cpp builds it, walks a step's stage uses, queues the updates
// and tears it down; streaming_boundaries.cpp moves boundary activations
// between the device, host memory and disk, and a step's inputs to the
// device. exec/streaming.h says what the executor does.
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "exec/stage_states_on_disk.h"
#include "exec/staged_states.h"
#include "exec/streaming.h"
#include "exec/trace.h"
#include "exec/work_queue.h"

namespace lt::exec {

// Note [Streaming teardown order]
// Tasks on worker threads point into Impl: the device's copy engines (a
// gradient download's `then` writes stage_squares and reads the slabs
// through norm_views; every copy records on the trace), the disk engine
// (records on the trace) and the optimizer thread (reads params, stages,
// grad_slabs, the model and the optimizer; records on the trace). So:
//  - ~Impl first waits for everything queued: both copy engines (they
//    belong to the device, which outlives Impl) and every update, whether
//    or not it failed: a wait that stopped at the first failed ticket would
//    leave later updates running against freed members;
//  - members are destroyed in the reverse of their order here, so what the
//    tasks read comes first and the two workers Impl owns come last: the
//    optimizer queue, then the disk engine, stop (running whatever is still
//    queued) while everything they touch is alive;
//  - the device is told to stop recording on the trace, which dies with
//    Impl while the device may go on (a caller's device).
//
// Note [A failed update stops the executor]
// An update that throws has left its stage's parameters and optimizer
// state partly written, so the run cannot go on from them. The first
// failure is kept (update_failure) as an lt::Error naming the stage; the
// step or sync() that meets it throws it, and so does every later step().
// A failure nobody was told of (the executor destroyed without a sync()
// after the failing step) is written to stderr by ~Impl, which must not
// throw.
struct StreamingExecutor::Impl {
  struct StageInfo {
    size_t first = 0, last = 0;   // the parameters it owns: [first, last) of `params`
    std::vector<size_t> weights;  // the parameters it reads (owned + a tied weight)
  };
  struct Slot {
    int stage = -1;
    std::vector<Tensor> weights;  // device copies, in StageInfo::weights order
    Ticket ready;
  };
  // One piece of the global batch that goes through a stage at a time.
  struct Chunk {
    Tensor ids;
    models::StageContext ctx;
  };
  // Boundary activations of one step.
  struct Boundary {
    std::vector<Tensor> device;  // per chunk; empty when not on the device
    std::vector<Tensor> host;    // per chunk, when offloaded
    Ticket offloaded, fetched;
    Ticket downloaded;  // the offload's device -> host copy (it holds `device` until done)
    // Placement::Disk: the chunks' shapes while their bytes are on disk.
    std::vector<Shape> disk_shapes;
    std::vector<DType> disk_dtypes;
    Ticket written, read_back;
    // A split read (Schedule::read_splits): per piece, the chunks' byte
    // ranges, and how many pieces have been issued; read_back is the
    // latest piece's ticket, each piece waiting for the one before.
    std::vector<std::vector<ByteRange>> pieces;
    size_t pieces_issued = 0;
  };

  // ---- Members, in one place (Note [Streaming teardown order]) ----

  // Fixed at construction; read by the compute thread and the workers.
  const models::CausalLM& model;
  optim::Optimizer& optimizer;
  StreamingDevice& device;
  const StreamingOptions options;
  const int num_blocks;
  const StagePlan plan;        // what a step runs (exec/streaming_plan.h)
  std::vector<Tensor> params;  // model.parameters(), in order
  std::vector<std::string> names;
  std::vector<Tensor> masters;     // the parameters' memory, through handles no binding moves
  std::vector<Tensor> grad_slabs;  // host gradients, filled by the download engine
  std::vector<Tensor> norm_views;  // handles whose .grad is the slab, for grad_squared_sum
  std::vector<StageInfo> stages;

  // From the last backward (stage_squares: the download engine writes it,
  // the compute thread reads it once the downloads' tickets are done).
  std::vector<bool> has_grad;  // per parameter: had a gradient last backward (compute thread)
  std::vector<double> stage_squares;  // sum of g^2 per stage, written by the download engine

  // The timeline the workers record on (null unless options.trace_path).
  std::unique_ptr<TraceRecorder> trace;
  int steps_started = 0;
  size_t trace_written = 0;

  // The optimizer thread's progress and first failure.
  std::vector<Ticket> updated;  // per stage: its latest update has finished
  // Per stage, its latest update queued a parameter at a time (Note
  // [Updates in pieces]): each parameter's index and ticket, in the order
  // they run; empty when the update was queued whole.
  struct UpdatePiece {
    size_t param = 0;
    Ticket done;
  };
  std::vector<std::vector<UpdatePiece>> update_pieces;
  Ticket step_finished;  // the latest optimizer finish_step()
  mutable std::mutex failure_mutex;
  std::exception_ptr update_failure;  // the first update that threw (an lt::Error)
  bool failure_reported = false;      // thrown to a caller of step() or sync()

  // The compute thread's state within a step.
  StepStats* stats = nullptr;
  Slot slots[2];
  int current_slot = 0;
  int slot_for_current_use = 0;  // 0, 1, or kDeviceSlot (a stage on the device)
  static constexpr int kDeviceSlot = 2;
  const std::vector<Tensor>& use_weights() const {
    return slot_for_current_use == kDeviceSlot ? device_slot.weights
                                               : slots[slot_for_current_use].weights;
  }
  std::vector<Chunk> chunks;
  std::vector<Boundary> boundaries;
  std::vector<Tensor> dy;         // per chunk: d loss / d (output of the stage being walked back)
  std::vector<Ticket> downloads;  // gradient copies (their squared sums)
  Ticket last_download, download_before_last;
  Ticket batch_uploaded;
  Ticket disk_last_write, disk_write_before_last;
  // The model's RoPE table in device memory (place_rope), and the host
  // table it was copied from.
  RopeTable device_rope;
  const void* rope_source = nullptr;

  // StreamingOptions::states_on_disk (Note [Stage states on disk],
  // streaming_states.cpp).
  std::vector<size_t> disk_stages;  // the stages whose states live on disk, ascending
  // Per disk stage, this step's update (updated[] is its write-back), and
  // how long that update waited for the stage's read (written by the
  // optimizer thread before the ticket completes): StepStats::states_disk_s.
  std::vector<Ticket> state_updated;
  std::vector<double> state_read_wait_s;
  // Per disk stage: its read queued ahead of its update this step (Note
  // [Updates during the backward]), until the update's attach takes it.
  std::vector<Ticket> states_read_ahead;
  // Per disk stage, its last read and write-back (states thread, before
  // their tickets complete): bytes and seconds, into StepStats::states_read_*.
  struct StateIo {
    int64_t read_bytes = 0, write_bytes = 0;
    double read_s = 0, write_s = 0;
  };
  std::vector<StateIo> state_io;
  // Per stage, its last CPU update (optimizer thread, before updated[s]
  // completes): seconds and parameters, into StepStats::cpu_update_* when
  // the forward takes the stage (the rate the run got, against the one the
  // plan priced).
  struct UpdateWork {
    double seconds = 0;
    int64_t parameters = 0;
  };
  std::vector<UpdateWork> update_work;
  // Per parameter: the host tensor load() uploads: the master, or for a
  // disk stage disk_states->upload_source().
  std::vector<Tensor> upload_sources;
  bool states_on_disk = false;  // compute thread; every disk stage evicted between steps

  // Workers Impl owns: last, so they stop first.
  std::unique_ptr<DiskSpill> disk;  // when the schedule places a boundary on disk
  // When disk_stages is not empty; its file I/O runs on state_queue,
  // which stops (running what is queued) before it goes.
  std::unique_ptr<StageStatesOnDisk> disk_states;
  WorkQueue state_queue{"states"};
  // sync_staged()'s answer over the disk stages (exec/staged_states.h).
  std::unique_ptr<StagedStates> staged;
  WorkQueue optimizer_queue{"optimizer"};

  // ---- streaming.cpp ----
  Impl(const models::CausalLM& m, optim::Optimizer& o, StreamingDevice& d, StreamingOptions opts);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  std::vector<Tensor> stage_weights(int stage) const;
  int find_slot(int stage) const;
  void load(int slot, int stage) { load_into(slots[slot], stage); }
  void load_into(Slot& s, int stage);
  int acquire(int stage, int next_stage);
  void invalidate_slots();
  void copy_out(int stage);
  void copy_out(const std::vector<int>& stages_out);
  void run_forward(int stage, bool recompute);
  void run_head(int stage);
  // Note [The fused tail] (streaming_plan.cpp): blocks `stage`..L and the
  // head, per chunk.
  void run_tail(int stage);
  void run_backward(int stage);
  void run_step();
  // Note [One use queued ahead] (streaming.cpp): closes the use's compute
  // span, whose time goes into `*stats.*counter` and the trace as use_name.
  // `idle_s`: the GPU's wait inside the use, counted as exposed already.
  void end_use(double StepStats::*counter, double idle_s = 0);
  // Waits for `ticket`; returns the seconds of the wait that the GPU spent
  // with no use queued.
  double exposed_wait(const Ticket& ticket);
  std::string use_name;  // the running use's, for the trace

  // ---- streaming_device_stages.cpp (Note [Stages on the device]) ----
  std::vector<bool> on_device;        // per stage: Schedule::stages_on_device
  bool device_stages_placed = false;  // their masters and states are in device memory now
  struct DeviceParam {
    // Every handle of its memory: the master's (params[i], masters[i],
    // norm_views[i], sharing one memory), then each optimizer state tensor.
    std::vector<Tensor> handles;
    size_t master_handles = 0;
    // While on the device: the host memory of the master, then of each state.
    struct HostMemory {
      std::shared_ptr<Storage> storage;
      int64_t offset = 0;
    };
    std::vector<HostMemory> host;
    Tensor weight;  // what the stage computes with: the master, or the optimizer's bf16 shadow
    Tensor grad;    // this step's gradient, from the stage's backward to its update
    bool placed = false;  // in device memory now
  };
  std::vector<DeviceParam> device_params;  // per parameter; no handles: it streams
  Slot device_slot;                        // the device stage in use's weights
  // The tail step's later stages' own slots (StagePlan::tail_slot_stages,
  // Note [The fused tail]).
  std::vector<Slot> tail_slots;
  void setup_device_stages();
  bool param_on_device(size_t i) const;
  // Masters and states into device memory (a step's start) or back into
  // their host memory (sync(), the destructor).
  void place_device_stages(bool to_device);
  void move_device_param(size_t i, bool to_device);  // place_device_stages' for one
  // copy_out() of a stage on the device: its gradients stay, their squared sum.
  void copy_out_on_device(int stage);
  // The step's updates of the stages on the device, on the compute stream.
  void update_device_stages(double lr, double grad_scale);
  void drop_device_gradients();

  // ---- streaming_ranks.cpp: data parallel (options.ranks) ----
  std::vector<char> copied_out;  // per stage, this step
  // At the step's start: the global batch's target count (the loss's
  // denominator), summed over the ranks.
  int64_t begin_sums_over_ranks(int64_t local_targets);
  // copy_out() of a rank of several: the stage's reduce over the ranks
  // started on the device, and the previous stage's finished: its sums
  // downloaded (all of them, or this rank's ZeRO-1 shard), so that each
  // reduce runs behind the next stage's backward (Note [Reduces behind
  // the backward]).
  void copy_out_over_ranks(int stage);
  struct StartedReduce {
    int stage = 0;
    std::vector<Tensor> grads;  // all-reduce: the sums' device tensors
    Tensor shard;               // ZeRO-1: this rank's shard of the sums
  };
  std::deque<StartedReduce> reducing;  // oldest first
  void finish_oldest_reduce();
  // After the backward: a stage this rank never copied out reduces zeros;
  // waits for the downloads, sums the loss and counts into `st` and the
  // parameters' has_grad over the ranks; the squared norm of the summed
  // gradients.
  double finish_sums_over_ranks(StepStats& st);
  // ZeRO-1 without shared weights (Note [Overlapped all-gathers]): after
  // enqueue_updates, the stages' all-gathers are due; gather_through(s)
  // starts those of stages 0..s not started yet (each once its update has
  // ended) and completes those up to s, copying them into the masters.
  void defer_gathers();
  void gather_through(size_t stage);
  bool gathers_due = false;
  size_t gathers_started = 0, gathers_finished = 0;  // stages, in order
  // Queues this step's update, stage by stage, then finish_step().
  void enqueue_updates(double lr, double grad_scale);
  struct EarlyStep;
  // Stage s's update, once `states_read` and `gradients` (if valid) have
  // completed; with `early`, only if early_update_goes().
  Ticket enqueue_update(size_t s, double lr, double grad_scale, Ticket states_read,
                        Ticket gradients = {}, std::shared_ptr<EarlyStep> early = nullptr);
  // The update of parameters [first, last) of stage s (enqueue_update's
  // task for part of the stage).
  Ticket enqueue_update_of(size_t s, size_t first, size_t last, double lr, double grad_scale,
                           Ticket states_read, Ticket gradients, std::shared_ptr<EarlyStep> early);
  // Note [Updates in pieces]: stage s's update as one task a parameter,
  // largest first; returns the stage's ticket (done when every piece is).
  Ticket enqueue_update_in_pieces(size_t s, double lr, double grad_scale);

  // ---- streaming_early_updates.cpp (Note [Updates during the backward]) ----
  std::shared_ptr<EarlyStep> early;  // this step's, from its start to its end; else null
  // step(), before the stage uses: whether this step updates during the
  // backward (the clip factor is known), and if so, sets `early` up.
  bool begin_early_updates(const StepOptions& step_options);
  // copy_out(s): queues stage s's update behind `gradients` (its download);
  // for a disk stage, attaching its read in the update, its write-back, and
  // the read of the disk stage kStagesOfStatesInFlight later.
  void queue_early_update(size_t s, const Ticket& gradients);
  void write_back_early(size_t j);  // of the j-th disk stage in backward order
  // queue_early_update's for a stage on the device (Note [Stages on the
  // device]): its update on the device, on the optimizer thread.
  Ticket enqueue_update_on_device(size_t s, std::shared_ptr<EarlyStep> step);
  // Optimizer thread, before stage s's update: whether it is made.
  bool early_update_goes(EarlyStep& step, size_t s);
  // step(), after the downloads and the norm: the last write-back,
  // finish_step(), and the step's outcome into `st`.
  void end_early_updates(StepStats& st);
  // A step that throws: the queued updates stop, the reads no update will
  // attach are dropped, and `early` with them; never throws.
  void abandon_early_updates() noexcept;

  // ---- streaming_states.cpp (Note [Stage states on disk]) ----
  void setup_state_placement();
  // State thread: disk_states' load and evict, counted in state_io.
  void load_states(size_t stage);
  void evict_states(size_t stage, bool recycle = false);
  // Every disk stage's states to disk (to_disk: before a step, the first one or
  // after a sync()) or back into host memory (sync(): for a checkpoint or an
  // evaluation; the next step sends them out again).
  void move_all_states(bool to_disk);
  void write_out_first_states();          // the constructor's, stage by stage
  void fill_first_masters(size_t stage);  // write_out_first_states()'s
  // Every optimizer state without memory belongs to a disk stage.
  void check_states_have_memory() const;
  // Every master has memory, or belongs to a disk stage (written out).
  void check_masters_have_memory() const;
  // Queues this step's reads, updates and write-backs (enqueue_updates).
  void enqueue_updates_on_disk(double lr, double grad_scale);
  // The step's first disk reads, queued before its stage uses (Note
  // [Updates during the backward]): of the first disk stages in backward
  // order when it updates during the backward, else in forward order.
  void read_states_before_backward(bool updates_early);
  // Queues stage s's read_ahead() into states_read_ahead[s].
  void read_states_ahead(size_t stage);
  // What stage s's update waits on for its states: the wait runs, on the
  // update's thread, the attach of the read states_read_ahead[s] queued.
  Ticket attach_in_update(size_t stage);
  // Drops the reads no update will attach, if any (behind what is queued),
  // and the memory kept for them.
  void drop_states_read_ahead();
  // StagedStates, between steps (Note [Stage states on disk]).
  bool stage_on_disk(size_t stage) const;
  std::map<std::string, Tensor> read_stage(size_t stage);
  std::shared_ptr<void> bring_in_weights(size_t stage);
  // The host gradient slabs, one per parameter (zeroed); and their release
  // while every stage's states are read back (sync()), so that host memory
  // holds the states or the slabs, not both; the next step allocates them
  // again after writing the states out.
  void allocate_grad_slabs();
  void release_grad_slabs();
  // The forward's wait for stage s's latest update (and with its states on
  // disk, its write-back), into optimizer_s and states_disk_s.
  void wait_for_update(size_t s);
  void count_update_work(size_t s);
  // On the optimizer thread, inside a catch block: keeps the error as the
  // first failure (if it is) and throws it, naming `what`, into the task's
  // ticket.
  [[noreturn]] void update_failed(const std::string& what);
  // Drops what a step left (boundaries, slots, gradients) once nothing
  // queued can still touch it; never throws.
  void settle_after_error();

  // Waits for every update queued so far, failed or not; never throws.
  void wait_updates_quietly() const;
  // Throws the first update failure (Note [A failed update stops the
  // executor]), if any.
  void rethrow_update_failure();
  // The recorder while the first options.trace_steps steps run, else null.
  TraceRecorder* tracing() const {
    return trace && steps_started <= options.trace_steps ? trace.get() : nullptr;
  }
  void write_trace();

  // ---- streaming_boundaries.cpp ----
  // Waits until both copy engines have run everything queued so far.
  void drain_copies();
  void fetch(int b);
  // Views of one device allocation for a boundary's chunks of these shapes,
  // or none when they are fewer than two or unlike (Note [One allocation per
  // boundary]).
  std::vector<Tensor> boundary_memory(const std::vector<Shape>& shapes, DType dtype);
  void offload(int b);
  void write_to_disk(int b);
  void read_from_disk(int b);
  void read_piece(int b, int piece);
  Ticket download(CopyList copies, std::function<void()> then, std::string label);
  void upload_batch();
  void place_rope();
  void prepare_input(int stage);
  const Tensor& input(int stage, size_t c) const {
    return stage == 0 ? chunks[c].ids : boundaries[stage - 1].device[c];
  }
  void release_device_copy(int b);
  // Starts the disk reads and uploads the schedule issues before use `u`.
  void issue_prefetches(size_t u);
};

}  // namespace lt::exec
