// exec.state_placement for the streaming executor: where the f32 masters
// and the optimizer states live between their stage's updates.
#include <algorithm>
#include <future>
#include <map>
#include <utility>

#include "exec/memory_budget.h"
#include "exec/streaming_impl.h"
#include "exec/weight_binding.h"

namespace lt::exec {

// Note [Stage states on disk]
// A stage placed on disk (StreamingOptions::states_on_disk; the run plan
// chooses which, train/state_placement.h) has its f32 masters and its
// optimizer states (adamw: m and v; adamw8bit: codes and scales, and its
// small tensors' m and v) in host memory only around that stage's update;
// in between they sit in the stage's region of one StageStateFile, checked
// by checksum on every read. The other stages keep theirs in host memory
// and update as they would with no stage on disk. The moves below (the
// handles, recycled memory, upload copies, the first write-out, a stage
// read or written between steps, the resume) are StageStatesOnDisk's
// (exec/stage_states_on_disk.h), which the offload executor shares (Note
// [Offload states on disk], offload_states.cpp).
//
// - Which memory: the optimizer's state() tensors are live handles, and the
//   masters are the model's parameter tensors. Evicting a stage writes each
//   tensor's bytes, then points every handle of that memory (the model's
//   parameter, the executor's `masters` and `norm_views` handles, the
//   optimizer's state tensor) at no storage, which frees it; loading
//   allocates fresh memory, reads into it and points the handles back. So
//   the optimizers need no change: they update the same tensors, bit for
//   bit as with the states in host memory.
// - The upload: load() copies a disk stage's weights from `upload_sources`,
//   a host copy of each master in the compute dtype: the device's own where
//   it keeps one that the optimizer writes (the CUDA device's pinned bf16
//   shadows, 2 bytes a parameter), else ours (the stand-in's f32),
//   refreshed from the master just before it is evicted.
// - The pipeline, per step (enqueue_updates_on_disk): the updates run in
//   stage order as always; one "states" thread runs the disk stages' reads
//   and write-backs in one FIFO order, for disk stages d0 < d1 < ...,
//     R(d0) R(d1) W(d0) R(d2) W(d1) ... W(last),
//   where R(d) loads stage d, U(d) (the optimizer thread) waits for R(d) and
//   updates, and W(d) waits for U(d), refreshes the upload copies, writes
//   the stage back and frees it. So a disk stage's update waits only for
//   its own read, reads run kStateReadAhead disk stages ahead of the
//   updates (behind the host stages' updates between them), and at most
//   kStateReadAhead + 1 disk stages' states are in host memory at once.
//   Each wait points at an earlier task (W -> U -> R, R(dj) after W(dj-2)
//   in the FIFO), so nothing waits in a cycle. Each R reads into memory
//   the stage's tensors do not point at until its update attaches it;
//   R(d0) and R(d1) are queued at the step's start
//   (read_states_before_backward) and run during its forward and backward,
//   the rest as the updates are queued (Note [Updates
//   during the backward] says why a read may come before its stage's
//   backward, and the order with train.clip_with_previous_norm, which
//   reads three disk stages ahead). updated[d] is W(d): the next
//   step's forward of stage d (which binds the model's parameters to device
//   copies) starts only when its memory is no longer being swapped.
// - The executor writes every disk stage out when it is built, before it
//   allocates the gradient slabs (and after the device's pinned copies
//   exist; the masters and states, see "The start" below): host
//   memory never holds the masters, the states and the slabs of a model
//   larger than it at once. Between steps every disk stage is on disk, and the trainer
//   leaves it there: sync_staged() (exec/staged_states.h) waits for the
//   updates and hands out the disk stages one at a time, each read through
//   the states thread into memory of its own (the stage's handles stay
//   without memory, its region unchanged). So
//   - a checkpoint (train/staged_checkpoint.h) lays out the model's and the
//     optimizer's files, then writes each stage's tensors where they go:
//     byte for byte the files a save from host memory writes;
//   - an evaluation (exec::evaluate_samples_by_stage) walks the stages,
//     for a group of held-out batches at a time, with the model's
//     parameters bound to each stage's read (bring_in_weights);
//   - a resume (load_optimizer_state) lets the optimizer load its step
//     counts and the host stages' states while every disk stage's state
//     tensor points at one scratch buffer, then reads each disk stage,
//     copies the checkpoint's states in and writes it back. Its masters are
//     the checkpoint's already: the model was loaded from it (a disk
//     stage's as the executor wrote it out), so a resume rebuilds the
//     scratch file from the checkpoint.
//   Each holds one stage (two for a head whose tied embedding is on disk)
//   beyond what a step holds. sync() still reads every stage back, having
//   freed the gradient slabs, for a caller that wants the model whole (the
//   math evaluation's generation, tests); the next step() writes them all
//   out again and then allocates the slabs. The destructor reads them back
//   too (the model outlives the executor), unless
//   StreamingOptions::read_states_back_at_end is false (the trainer, done
//   with the model). (The checksums live in host memory, so a file a killed
//   run left is never read: the next run in that directory removes it.)
//   The start: the optimizer makes the disk stages' states without memory
//   (AdamW's and AdamW8bit's states_without_memory; the trainer passes the
//   plan's disk stages), and write_out_first_states() gives each disk
//   stage's states memory, their first values (optimizer.reset_state),
//   writes the stage and frees it: one stage's states in host memory at a
//   time (a state already with memory, from an optimizer built without the
//   flags, is written as it is). The masters likewise: the trainer
//   resolves its plan from config.json before it loads any weight
//   (train/weights_source.h) and makes the disk stages' parameters without
//   memory (CausalLM::random and uninitialized with flags); here each such
//   stage's masters get memory, their values from options.fill_masters (the
//   stage's tensors read from the safetensors mapping, or drawn again from
//   the generator as it was at the stage's start: a whole load's values bit
//   for bit), and the device's upload copies (the CUDA device's pinned bf16
//   shadows) are filled from them before the stage is written out and
//   freed. So the start holds the host stages' masters and one disk stage's
//   masters and states. Not streamed yet: runs of several processes (the
//   trainer loads every master there; ZeRO-1 refuses states on disk), and
//   sync() (the math evaluation's generation) reads every stage back
//   (docs/host-memory.md).
// - Errors: a failed read (I/O error or checksum) fails the stage's update,
//   a failed write-back its ticket; either is the executor's update failure
//   (Note [A failed update stops the executor]), whose message names the
//   file, the stage and the operation. The file is removed when the
//   executor goes (and a killed run's file by the next run in that
//   directory).
namespace {

// Reads run this many stages ahead of the updates (memory_budget.h counts
// kStagesOfStatesInFlight stages in host memory).
constexpr size_t kStateReadAhead = kStagesOfStatesInFlight - 1;

}  // namespace

std::vector<bool> flags_per_parameter(const models::CausalLM& model,
                                      const std::vector<bool>& per_stage) {
  std::vector<bool> flags;
  size_t stage = 0;
  for (const auto& s : model.stages()) {
    nn::NamedParameters own;
    s->collect(own);
    flags.insert(flags.end(), own.size(), stage < per_stage.size() && per_stage[stage]);
    ++stage;
  }
  LT_CHECK(flags.size() == model.parameters().size(), "streaming executor: the stages list ",
           flags.size(), " parameters, the model ", model.parameters().size());
  return flags;
}

void StreamingExecutor::Impl::setup_state_placement() {
  std::vector<StageStatesOnDisk::Stage> ranges;
  for (size_t s = 0; s < stages.size(); ++s)
    ranges.push_back({stages[s].first, stages[s].last, model.stages()[s]->name()});
  std::vector<std::vector<Tensor>> handles;
  for (size_t i = 0; i < params.size(); ++i)
    handles.push_back({params[i], masters[i], norm_views[i]});
  disk_states = std::make_unique<StageStatesOnDisk>(
      StageStateFile::Options{options.disk.directory, options.disk.file}, std::move(ranges),
      options.states_on_disk, names, handles, optimizer.state(), device, state_queue);
  state_updated.assign(stages.size(), Ticket());
  state_read_wait_s.assign(stages.size(), 0.0);
  states_read_ahead.assign(stages.size(), Ticket());
  state_io.assign(stages.size(), StateIo{});
  for (size_t s : disk_stages)
    for (size_t i = stages[s].first; i < stages[s].last; ++i)
      upload_sources[i] = disk_states->upload_source(i);
  staged = std::make_unique<StagedStatesOnDisk>(
      *disk_states, optimizer, stages.size(), [this] { return states_on_disk; },
      [this](size_t s) { return bring_in_weights(s); });
}

// Note [Recycled state memory]: within a step's pipeline, a disk stage's
// read takes the memory an earlier disk stage's write-back gave up, of the
// same size (blocks are alike), instead of fresh memory: fresh host memory
// costs a page fault per page on its first touch, which in a VM ran at
// 0.4-0.7 GB/s (core/allocator.cpp), while the 14B's 17 disk stages read
// 28 GB a step. The step's last write-back releases what is left, so
// between steps host memory holds what it held without recycling, and
// within one no more than it did (a read takes recycled memory before
// allocating). StageStatesOnDisk::read_ahead (load's read) and evict do
// it, on the states thread; a read held ahead of its update (Note [Updates
// during the backward]) counts as one of the kStagesOfStatesInFlight
// stages, and a step that takes no update drops it (drop_reads).
void StreamingExecutor::Impl::load_states(size_t stage) {
  const StageStatesOnDisk::Io io = disk_states->load(stage);
  state_io[stage].read_bytes = io.bytes;
  state_io[stage].read_s = io.seconds;
}

void StreamingExecutor::Impl::evict_states(size_t stage, bool recycle) {
  const StageStatesOnDisk::Io io = disk_states->evict(stage, recycle);
  state_io[stage].write_bytes = io.bytes;
  state_io[stage].write_s = io.seconds;
}

// Note [Stage states on disk], "the start": each disk stage in turn gets
// memory for the states the optimizer made without memory, their initial
// values (optimizer.reset_state), and is written out and freed; so the
// states of one stage are in host memory at a time. A state made without
// memory outside the disk stages has no place to get it: an error.
void StreamingExecutor::Impl::write_out_first_states() {
  state_queue
      .enqueue([this] {
        try {
          disk_states->write_out_first(optimizer, [this](size_t s) { fill_first_masters(s); });
        } catch (...) {
          update_failed("writing every stage's first states to disk");
        }
      })
      .get();
  states_on_disk = true;
}

// The masters of disk stage `s`, just given memory: their values from
// options.fill_masters (the device's upload copies follow from them).
void StreamingExecutor::Impl::fill_first_masters(size_t s) {
  LT_CHECK(static_cast<bool>(options.fill_masters), "streaming executor: stage '",
           model.stages()[s]->name(),
           "' has masters without memory, but nothing fills them (StreamingOptions::fill_masters)");
  options.fill_masters(s);
}

void StreamingExecutor::Impl::check_masters_have_memory() const {
  for (size_t s = 0; s < stages.size(); ++s) {
    if (stage_on_disk(s)) continue;
    for (size_t i = stages[s].first; i < stages[s].last; ++i)
      LT_CHECK(params[i].storage(), "streaming executor: master '", names[i],
               "' has no memory, but its stage keeps its masters in host memory ",
               "(StreamingOptions::states_on_disk)");
  }
}

void StreamingExecutor::Impl::check_states_have_memory() const {
  for (const auto& [name, t] : optimizer.state())
    LT_CHECK(t.storage() || (disk_states && disk_states->holds(t)),
             "streaming executor: the optimizer made state '", name,
             "' without memory, but its stage keeps its states in host memory ",
             "(StreamingOptions::states_on_disk)");
}

void StreamingExecutor::Impl::move_all_states(bool to_disk) {
  drop_states_read_ahead();  // a skipped step's
  state_queue
      .enqueue([this, to_disk] {
        try {
          for (size_t s : disk_stages) to_disk ? evict_states(s) : load_states(s);
        } catch (...) {
          // Some stages are on disk, some not: the executor cannot go on,
          // and a checkpoint must not be written from it.
          update_failed(to_disk ? "writing every stage's states to disk"
                                : "reading every stage's states back");
        }
      })
      .get();
  states_on_disk = to_disk;
}

void StreamingExecutor::Impl::read_states_before_backward(bool updates_early) {
  if (!disk_states) return;
  drop_states_read_ahead();  // a skipped step's (not finite: no update took them)
  const size_t n = disk_stages.size();
  // Note [Updates during the backward]: k reads ahead of the write-backs
  // there; with exact clipping the FIFO's first reads.
  const size_t ahead = updates_early ? size_t{kStagesOfStatesInFlight} : kStateReadAhead;
  for (size_t j = 0; j < std::min(n, ahead); ++j)
    read_states_ahead(updates_early ? disk_stages[n - 1 - j] : disk_stages[j]);
}

void StreamingExecutor::Impl::read_states_ahead(size_t s) {
  states_read_ahead.at(s) = state_queue.enqueue([this, s, trace = tracing()] {
    TraceSpan span(trace, "disk", "read states " + model.stages()[s]->name());
    disk_states->read_ahead(s);
  });
}

Ticket StreamingExecutor::Impl::attach_in_update(size_t s) {
  Ticket read = std::exchange(states_read_ahead.at(s), Ticket());
  LT_CHECK(read.valid(), "streaming executor: stage '", model.stages()[s]->name(),
           "' has no read of its states queued ahead of its update");
  // Deferred: the update's wait for its states (enqueue_update, after its
  // gradients' download) runs this, on the optimizer thread, after the
  // stage's backward, when nothing binds its parameters any more. The
  // update's wait so counts the read's (StepStats::states_disk_s).
  return std::async(std::launch::deferred,
                    [this, s, read = std::move(read)] {
                      read.get();  // a failed read fails the update, which names the stage
                      const StageStatesOnDisk::Io io = disk_states->attach(s);
                      state_io[s].read_bytes = io.bytes;
                      state_io[s].read_s = io.seconds;
                    })
      .share();
}

void StreamingExecutor::Impl::drop_states_read_ahead() {
  if (std::none_of(states_read_ahead.begin(), states_read_ahead.end(),
                   [](const Ticket& t) { return t.valid(); }))
    return;
  for (Ticket& t : states_read_ahead) t = Ticket();
  state_queue.enqueue([this] {
    disk_states->drop_reads();
    disk_states->drop_spare();
  });
}

void StreamingExecutor::Impl::enqueue_updates_on_disk(double lr, double grad_scale) {
  // Every read is attached by its update: the first ones were queued at
  // the step's start (read_states_before_backward), the rest are queued here.
  auto read = [&](size_t s) {
    if (!states_read_ahead[s].valid()) read_states_ahead(s);
    return attach_in_update(s);
  };
  auto update = [&](size_t s, Ticket states_read) {
    const bool on_disk = states_read.valid();
    Ticket t = enqueue_update(s, lr, grad_scale, std::move(states_read));
    (on_disk ? state_updated[s] : updated[s]) = t;
    return t;
  };
  auto write_back = [&](size_t s, Ticket update) {
    return updated[s] = state_queue.enqueue([this, s, update, trace = tracing()] {
      update.get();  // a failed update is already the executor's failure
      TraceSpan span(trace, "disk", "write states " + model.stages()[s]->name());
      try {
        const bool last = s == disk_stages.back();
        evict_states(s, /*recycle=*/!last);
        if (last) disk_states->drop_spare();
      } catch (...) {
        update_failed("writing back the states of stage '" + model.stages()[s]->name() + "'");
      }
    });
  };
  queue_updates_through_disk(stages.size(), disk_stages, kStateReadAhead, read, update, write_back);
}

// Note [Stage states on disk], "one stage at a time": between steps (the
// updates waited for, nothing queued on the states thread), what a
// checkpoint, an evaluation or a resume reads goes through the states
// thread, into memory of its own; the stage's handles stay without memory.
bool StreamingExecutor::Impl::stage_on_disk(size_t stage) const {
  return states_on_disk && stage < options.states_on_disk.size() && options.states_on_disk[stage];
}

std::map<std::string, Tensor> StreamingExecutor::Impl::read_stage(size_t stage) {
  LT_CHECK(stage_on_disk(stage), "streaming executor: stage ", stage,
           " has no states on disk to read");
  return disk_states->read(stage);
}

std::shared_ptr<void> StreamingExecutor::Impl::bring_in_weights(size_t stage) {
  struct Held {
    std::vector<std::map<std::string, Tensor>> read;  // per stage read
    std::unique_ptr<WeightBinding> binding;           // goes first
  };
  auto held = std::make_shared<Held>();
  std::map<size_t, size_t> read_of;  // owner stage -> index into held->read
  std::vector<Tensor> bound, memory;
  for (size_t i : stages.at(stage).weights) {
    size_t owner = 0;
    while (!(stages[owner].first <= i && i < stages[owner].last)) ++owner;
    if (!stage_on_disk(owner)) continue;
    auto [it, fresh] = read_of.emplace(owner, held->read.size());
    if (fresh) held->read.push_back(read_stage(owner));
    bound.push_back(params[i]);
    memory.push_back(held->read[it->second].at(names[i]));
  }
  held->binding = std::make_unique<WeightBinding>(bound, memory);
  return held;
}

}  // namespace lt::exec
