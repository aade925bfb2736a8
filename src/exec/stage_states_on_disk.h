#pragma once
// StageStatesOnDisk: the stages a CPU-master executor (streaming, offload)
// keeps on disk between their updates (exec.state_placement), as tensors
// and handles: which f32 masters and optimizer states each such stage
// holds, and their moves between host memory and the stage's region of a
// StageStateFile. Note [Stage states on disk] (exec/streaming_states.cpp)
// says how the executors use it; this is the part both share.
//
// - load()/evict() point every handle of a tensor's memory (the model's
//   parameter, an executor's aliases of it, the optimizer's state tensor)
//   at fresh (or recycled) memory read from the file, or at none after
//   writing it; the optimizers update the same tensors, bit for bit.
//   load() is read_ahead() then attach(): the read fills memory the handles
//   do not point at yet, so it may run while the compute thread binds the
//   stage's parameters to device copies (a WeightBinding), and attach()
//   points the handles at it once no binding of them is left (the stage's
//   update; Note [Updates during the backward]).
// - read()/write() move a stage's tensors through memory of the caller's,
//   the handles left without memory: one stage at a time between steps (a
//   checkpoint, an evaluation, a resume, ZenFlow's columns).
// - upload_source(i): what a weight upload copies for parameter i: the
//   device's own host copy where it keeps one the optimizer writes (the
//   CUDA device's pinned bf16 shadow), else, for a disk stage, a copy of
//   ours in the compute dtype that evict() and write() refresh from the
//   master; for the other stages, the master.
// load(), read_ahead(), evict(), drop_spare(), drop_reads() and
// write_out_first() run on the executor's "states" thread (the queue it was
// given); attach(s) on any one thread after stage s's read_ahead() has
// completed and before its evict() runs; read(), write() and
// load_optimizer_state() queue their file I/O there and wait, so call them
// between steps.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "exec/stage_state_file.h"
#include "exec/staged_states.h"
#include "exec/streaming_device.h"
#include "exec/work_queue.h"
#include "optim/optimizer.h"

namespace lt::exec {

class StageStatesOnDisk {
 public:
  struct Stage {
    size_t first = 0, last = 0;  // its parameters [first, last)
    std::string name;            // "block.3", in errors
  };
  // Bytes moved and seconds taken by one load or eviction.
  struct Io {
    int64_t bytes = 0;
    double seconds = 0;
  };
  // `masters`: per parameter (in the optimizer's order), every handle of
  // its master's memory; `optimizer_state`: optimizer.state(), whose
  // tensors go with the longest parameter name they start with. Stages
  // with on_disk[s] are the disk stages.
  StageStatesOnDisk(const StageStateFile::Options& file, std::vector<Stage> stages,
                    const std::vector<bool>& on_disk, const std::vector<std::string>& names,
                    const std::vector<std::vector<Tensor>>& masters,
                    const optim::NamedTensors& optimizer_state, StreamingDevice& device,
                    WorkQueue& queue);

  const std::vector<size_t>& disk_stages() const { return disk_stages_; }
  bool placed(size_t stage) const;  // a disk stage
  // A disk stage's tensors' names: "<param>" or "<param>.<state>".
  const std::vector<std::string>& labels(size_t stage) const { return states_.at(stage).labels; }
  const Tensor& upload_source(size_t param) const { return upload_sources_[param]; }
  // Whether `state` is one of a disk stage's tensors.
  bool holds(const Tensor& state) const;

  // ---- on the states thread ----
  Io load(size_t stage);  // read_ahead(stage), then attach(stage)
  // The stage's tensors read from its region into memory (recycled or
  // fresh) that their handles do not point at, kept until attach() or
  // drop_reads(). Its Io is attach()'s answer.
  void read_ahead(size_t stage);
  // Points the stage's handles at what read_ahead(stage) read; returns that
  // read's bytes and seconds.
  Io attach(size_t stage);
  // Refreshes our upload copies, writes the stage and frees its memory, or
  // with `recycle` keeps it for a later load() (Note [Recycled state
  // memory]) until drop_spare().
  Io evict(size_t stage, bool recycle = false);
  void drop_spare() { spare_.clear(); }
  // Frees what read_ahead() read and no attach() took (a step that failed
  // or was skipped before its updates).
  void drop_reads();
  // Note [Stage states on disk], "the start": each disk stage in turn has
  // memory given to its tensors made without it, the masters' values from
  // fill_masters(stage) (then the device's upload copies from them), the
  // states' first values (optimizer.reset_state), and is written and freed.
  void write_out_first(optim::Optimizer& optimizer,
                       const std::function<void(size_t)>& fill_masters);

  // ---- between steps ----
  std::map<std::string, Tensor> read(size_t stage);
  // `tensors` (read()'s names and sizes) become the stage's; our upload
  // copies follow its masters.
  void write(size_t stage, const std::map<std::string, Tensor>& tensors);
  // optimizer.load_state(state), each disk stage's part written into its
  // region one stage at a time (its masters kept).
  void load_optimizer_state(optim::Optimizer& optimizer, const optim::NamedTensors& state);

 private:
  struct Tensors {
    std::vector<std::string> labels;
    std::vector<std::vector<Tensor>> handles;  // per tensor: every handle of its memory
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    std::vector<bool> master;       // per tensor: a parameter's master (else an optimizer state)
    std::vector<size_t> master_at;  // per parameter of the stage: its master's index above
  };
  Tensor memory_for(const Shape& shape, DType dtype);
  void refresh_our_copies(size_t stage, const std::function<Tensor(size_t)>& master_of);

  std::unique_ptr<StageStateFile> file_;
  std::vector<Stage> stages_;
  std::vector<size_t> disk_stages_;  // ascending
  std::vector<Tensors> states_;      // per stage; empty for the host stages
  std::vector<Tensor> upload_sources_;
  std::vector<bool> ours_;  // per parameter: upload_sources_ is our copy, refreshed
  std::vector<std::shared_ptr<Storage>> spare_;
  // Per stage: read_ahead()'s memory, until attach() or drop_reads().
  struct Read {
    bool done = false;
    std::vector<Tensor> tensors;  // in Tensors::handles order
    Io io;
  };
  std::vector<Read> reads_;
  WorkQueue& queue_;
};

// StagedStates (sync_staged()'s answer) over `disk`: a stage is on disk
// while on_disk_now() (the executor has every disk stage evicted, between
// steps) and disk.placed(); `bring_in` is the executor's bring_in_weights.
class StagedStatesOnDisk final : public StagedStates {
 public:
  StagedStatesOnDisk(StageStatesOnDisk& disk, optim::Optimizer& optimizer, size_t stage_count,
                     std::function<bool()> on_disk_now,
                     std::function<std::shared_ptr<void>(size_t)> bring_in);
  std::vector<bool> on_disk() const override;
  std::vector<std::string> names(size_t stage) const override { return disk_.labels(stage); }
  std::map<std::string, Tensor> read(size_t stage) override;
  std::shared_ptr<void> bring_in_weights(size_t stage) override { return bring_in_(stage); }
  void load_optimizer_state(const optim::NamedTensors& state) override;

 private:
  StageStatesOnDisk& disk_;
  optim::Optimizer& optimizer_;
  size_t stage_count_;
  std::function<bool()> on_disk_now_;
  std::function<std::shared_ptr<void>(size_t)> bring_in_;
};

// Note [Stage states on disk]'s order for one step's updates: for the
// stages in order, update(s, read) (a host stage's `read` is invalid), the
// disk stages' reads kept `read_ahead` disk stages ahead of their updates
// and each write-back queued behind them, R(d0) R(d1) W(d0) R(d2) W(d1)
// ... for read_ahead 2. Returns per stage the update's ticket and, for a
// disk stage, its write-back's in `written` (else invalid).
struct QueuedUpdates {
  std::vector<Ticket> updated, written;
};
QueuedUpdates queue_updates_through_disk(size_t stage_count, const std::vector<size_t>& disk_stages,
                                         size_t read_ahead,
                                         const std::function<Ticket(size_t)>& read,
                                         const std::function<Ticket(size_t, Ticket)>& update,
                                         const std::function<Ticket(size_t, Ticket)>& write_back);

}  // namespace lt::exec
