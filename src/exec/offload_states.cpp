// exec.state_placement for the offload executor and its ZenFlow policy:
// where the f32 masters and the optimizer states live between updates.
//
// Note [Offload states on disk]
// As the streaming executor's (Note [Stage states on disk],
// streaming_states.cpp), with the pieces it shares (StageStatesOnDisk,
// queue_updates_through_disk): a disk stage's masters and optimizer states
// sit in its region of one StageStateFile between its updates, checked by
// checksum on every read; the other stages keep theirs in host memory.
// - The update: every CPU update (the synchronous step's, a ZenFlow
//   window's) runs stage by stage on the optimizer thread, as the host
//   run's, and one "states" thread reads each disk stage kStateReadAhead
//   disk stages ahead of its update and writes it back (and frees it)
//   behind it, in the FIFO order of the Note. Each parameter's update is
//   the host run's, on the same values: the results are bit for bit.
// - The uploads: a disk stage's weights go to the device from the host
//   copy that stays in host memory (StageStatesOnDisk::upload_source: the
//   CUDA device's pinned bf16 shadow, which the update writes, or the
//   stand-in's own f32 copy, refreshed from the master as the stage is
//   written back), after the stage's write-back. ZenFlow's merges wait for
//   the whole CPU update, write-backs included (cpu_update).
// - ZenFlow's gradients (summed on the device over a window, then copied
//   into the host slabs) and its device columns' f32 masters and moments
//   stay where they are: only the masters and states go to disk.
//   Choosing columns reads each disk stage's masters from the file, and
//   writing the device's columns back into the masters (a checkpoint, a
//   reselection) reads, changes and rewrites each disk stage in turn.
// - The start: the executor writes every disk stage out, a stage at a
//   time (masters and states made without memory get it, and their values
//   from OffloadOptions::fill_masters and optimizer.reset_state), then
//   uploads the first weights (a disk stage's from its upload copy). Between
//   steps every disk stage is on disk; sync_staged() hands them out a
//   stage at a time (a checkpoint, a resume); evaluation and generation
//   read the device weights after sync(), which leaves them there.
//   sync_masters() reads them all back (tests); the next step writes them
//   out again.
// - Errors: a failed read (I/O or checksum) fails the stage's update, its
//   write-back and upload, and so the step, with a message that names the
//   file, the stage and the state. The file is removed when the executor
//   goes (a killed run's by the next run in that directory).
// Not yet: several processes (setup_state_placement refuses them with
// states on disk, naming the key).
#include <map>
#include <utility>

#include "exec/memory_budget.h"
#include "exec/offload_impl.h"

namespace lt::exec {

namespace {

// Reads run this many disk stages ahead of the updates (memory_budget.h
// counts kStagesOfStatesInFlight stages in host memory).
constexpr size_t kStateReadAhead = kStagesOfStatesInFlight - 1;

}  // namespace

void OffloadExecutor::Impl::setup_state_placement() {
  LT_CHECK(options.states_on_disk.empty() || options.states_on_disk.size() == stages.size(),
           "offload executor: states_on_disk names ", options.states_on_disk.size(),
           " stages, the model has ", stages.size());
  for (size_t s = 0; s < options.states_on_disk.size(); ++s)
    if (options.states_on_disk[s]) disk_stages.push_back(s);
  if (disk_stages.empty()) return check_states_have_memory();
  LT_CHECK(!options.ranks,
           "exec.state_placement: a run of several processes keeps every "
           "master and optimizer state of exec.mode ",
           options.zenflow ? "zenflow" : "offload",
           " in host memory so far; set exec.state_placement: host");
  std::vector<StageStatesOnDisk::Stage> ranges;
  for (size_t s = 0; s < stages.size(); ++s)
    ranges.push_back({stages[s].first, stages[s].last, model.stages()[s]->name()});
  std::vector<std::vector<Tensor>> handles;
  for (const Tensor& m : masters) handles.push_back({m});  // the model's own tensors
  disk_states = std::make_unique<StageStatesOnDisk>(options.state_file, std::move(ranges),
                                                    options.states_on_disk, names, handles,
                                                    optimizer.state(), *device, state_queue);
  // Evaluation reads the device weights (eval_model()), which are whole.
  state_reads.assign(stages.size(), {});
  state_writes.assign(stages.size(), {});
  staged = std::make_unique<StagedStatesOnDisk>(
      *disk_states, optimizer, stages.size(), [this] { return states_on_disk; },
      [](size_t) { return std::shared_ptr<void>(); });
  if (options.max_state_io_delay_us > 0)
    state_queue.inject_delays(options.max_state_io_delay_us, 13);
  state_queue
      .enqueue([this] {
        disk_states->write_out_first(optimizer, [this](size_t s) {
          LT_CHECK(static_cast<bool>(options.fill_masters), "offload executor: stage '",
                   model.stages()[s]->name(),
                   "' has masters without memory, but nothing fills them "
                   "(OffloadOptions::fill_masters)");
          options.fill_masters(s);
        });
      })
      .get();
  states_on_disk = true;
  check_states_have_memory();
}

void OffloadExecutor::Impl::check_states_have_memory() const {
  for (size_t s = 0; s < stages.size(); ++s) {
    if (disk_states && disk_states->placed(s)) continue;
    for (size_t i = stages[s].first; i < stages[s].last; ++i)
      LT_CHECK(masters[i].storage(), "offload executor: master '", names[i],
               "' has no memory, but its stage keeps its masters in host memory ",
               "(OffloadOptions::states_on_disk)");
  }
  // Over ranks, state() is a collective gather (ZeRO-1's), and no state
  // lives on disk there.
  if (options.ranks) return;
  for (const auto& [name, t] : optimizer.state())
    LT_CHECK(t.storage() || (disk_states && disk_states->holds(t)),
             "offload executor: the optimizer made state '", name,
             "' without memory, but its stage keeps its states in host memory ",
             "(OffloadOptions::states_on_disk)");
}

void OffloadExecutor::Impl::count_state_io() {
  if (!disk_states || !stats) return;
  for (size_t s : disk_stages) {
    stats->states_read_bytes += std::exchange(state_reads[s].bytes, 0);
    stats->states_read_s += std::exchange(state_reads[s].seconds, 0.0);
    stats->states_write_bytes += std::exchange(state_writes[s].bytes, 0);
    stats->states_write_s += std::exchange(state_writes[s].seconds, 0.0);
  }
}

bool OffloadExecutor::Impl::stage_on_disk(size_t stage) const {
  return states_on_disk && disk_states->placed(stage);
}

const Tensor& OffloadExecutor::Impl::upload_source(size_t i) const {
  return disk_states ? disk_states->upload_source(i) : masters[i];
}

void OffloadExecutor::Impl::move_all_states(bool to_disk) {
  state_queue
      .enqueue([this, to_disk] {
        for (size_t s : disk_stages) to_disk ? disk_states->evict(s) : disk_states->load(s);
      })
      .get();
  states_on_disk = to_disk;
}

void OffloadExecutor::Impl::update_stages(int set, double lr, double scale,
                                          const std::function<void(size_t, Ticket)>& then) {
  if (!disk_states) {
    for (size_t s = 0; s < stages.size(); ++s)
      then(s, update_on_host(stages[s].first, stages[s].last, set, lr, scale, ready_ticket()));
    return;
  }
  auto read = [&](size_t s) {
    return state_queue.enqueue([this, s] { state_reads[s] = disk_states->load(s); });
  };
  auto update = [&](size_t s, Ticket states_read) {
    return update_on_host(stages[s].first, stages[s].last, set, lr, scale,
                          states_read.valid() ? std::move(states_read) : ready_ticket());
  };
  auto write_back = [&](size_t s, Ticket updated) {
    return state_queue.enqueue([this, s, updated] {
      updated.get();  // a failed read or update fails the write-back too
      const bool last = s == disk_stages.back();
      state_writes[s] = disk_states->evict(s, /*recycle=*/!last);
      if (last) disk_states->drop_spare();
    });
  };
  const QueuedUpdates q = queue_updates_through_disk(stages.size(), disk_stages, kStateReadAhead,
                                                     read, update, write_back);
  for (size_t s = 0; s < stages.size(); ++s)
    then(s, q.written[s].valid() ? q.written[s] : q.updated[s]);
}

void OffloadExecutor::Impl::with_stage_masters(
    bool write, const std::function<void(size_t, const std::vector<Tensor>&)>& fn) {
  for (size_t s = 0; s < stages.size(); ++s) {
    std::vector<Tensor> own;
    if (!stage_on_disk(s)) {
      own.assign(masters.begin() + static_cast<std::ptrdiff_t>(stages[s].first),
                 masters.begin() + static_cast<std::ptrdiff_t>(stages[s].last));
      fn(s, own);
      continue;
    }
    std::map<std::string, Tensor> tensors = disk_states->read(s);
    for (size_t i = stages[s].first; i < stages[s].last; ++i) own.push_back(tensors.at(names[i]));
    fn(s, own);
    if (write) disk_states->write(s, tensors);
  }
}

StagedStates* OffloadExecutor::sync_staged() {
  if (!impl_->disk_states) return nullptr;
  StepStats ignored;
  impl_->stats = &ignored;
  impl_->finish_masters();
  impl_->wait_uploads();
  impl_->settle_downloads();
  if (impl_->rescatter_due) impl_->rescatter_columns();
  impl_->optimizer_queue.enqueue([] {}).get();
  impl_->state_queue.enqueue([] {}).get();
  impl_->device->finish_compute();
  impl_->stats = nullptr;
  return impl_->staged.get();
}

}  // namespace lt::exec
