// exec.state_placement for the streaming executor: where the f32 masters
// and the optimizer states live between their stage's updates.
#include <algorithm>
#include <chrono>
#include <map>

#include "exec/memory_budget.h"
#include "exec/streaming_impl.h"
#include "exec/weight_binding.h"
#include "optim/shadow.h"

namespace lt::exec {

// Note [Stage states on disk]
// A stage placed on disk (StreamingOptions::states_on_disk; the run plan
// chooses which, train/state_placement.h) has its f32 masters and its
// optimizer states (adamw: m and v; adamw8bit: codes and scales, and its
// small tensors' m and v) in host memory only around that stage's update;
// in between they sit in the stage's region of one StageStateFile, checked
// by checksum on every read. The other stages keep theirs in host memory
// and update as they would with no stage on disk.
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
//   in the FIFO), so nothing waits in a cycle. updated[d] is W(d): the next
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

void point_at(const std::vector<Tensor>& handles, std::shared_ptr<Storage> storage) {
  for (const Tensor& h : handles) {
    h.impl()->storage = storage;
    h.impl()->offset = 0;
  }
}

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

// StagedStates over the executor's Impl, for sync_staged().
class StreamingExecutor::Impl::StagedStatesOf final : public StagedStates {
 public:
  explicit StagedStatesOf(Impl& m) : m_(m) {}
  std::vector<bool> on_disk() const override {
    std::vector<bool> out(m_.stages.size());
    for (size_t s = 0; s < out.size(); ++s) out[s] = m_.stage_on_disk(s);
    return out;
  }
  std::vector<std::string> names(size_t stage) const override {
    return m_.stage_states.at(stage).labels;
  }
  std::map<std::string, Tensor> read(size_t stage) override { return m_.read_stage(stage); }
  std::shared_ptr<void> bring_in_weights(size_t stage) override {
    return m_.bring_in_weights(stage);
  }
  void load_optimizer_state(const optim::NamedTensors& state) override {
    m_.load_optimizer_state(state);
  }

 private:
  Impl& m_;
};

void StreamingExecutor::Impl::setup_state_placement() {
  state_file = std::make_unique<StageStateFile>(
      StageStateFile::Options{options.disk.directory, options.disk.file});
  remove_stale_state_files(options.disk.directory);  // ours is locked, so it stays
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < names.size(); ++i) index_of[names[i]] = i;
  // Each state tensor "<param>.<field...>" goes with the longest parameter
  // name it starts with; the per-parameter step counts are scalars the
  // optimizer rebuilds for state(), not memory of its own.
  std::vector<optim::NamedTensors> states_of(params.size());
  for (const auto& [name, t] : optimizer.state()) {
    if (name.size() > 5 && name.ends_with(".step")) continue;
    for (size_t dot = name.rfind('.'); dot != std::string::npos && dot > 0;
         dot = name.rfind('.', dot - 1)) {
      auto it = index_of.find(name.substr(0, dot));
      if (it == index_of.end()) continue;
      // A state made without memory (the optimizer's states_without_memory)
      // gets it stage by stage in write_out_first_states().
      LT_CHECK(!t.storage() || (t.device().is_cpu() && t.is_contiguous()),
               "exec.state_placement disk: state '", name,
               "' is not a contiguous host tensor: ", t.str());
      states_of[it->second].emplace_back(name, t);
      break;
    }
  }
  stage_states.resize(stages.size());
  state_updated.assign(stages.size(), Ticket());
  state_read_wait_s.assign(stages.size(), 0.0);
  state_io.assign(stages.size(), StateIo{});
  refreshed_uploads.assign(params.size(), false);
  for (size_t s : disk_stages) {
    StageStates& st = stage_states[s];
    for (size_t i = stages[s].first; i < stages[s].last; ++i) {
      st.labels.push_back(names[i]);
      st.handles.push_back({params[i], masters[i], norm_views[i]});
      st.master.push_back(true);
      for (const auto& [name, t] : states_of[i]) {
        st.labels.push_back(name);
        st.handles.push_back({t});
        st.master.push_back(false);
      }
    }
    for (const auto& h : st.handles) {
      st.shapes.push_back(h.front().shape());
      st.dtypes.push_back(h.front().dtype());
    }
    // The device's own copy where it keeps one the optimizer updates (no
    // second copy, nothing to refresh); else one of ours, refreshed from
    // the master before each eviction.
    for (size_t i = stages[s].first; i < stages[s].last; ++i) {
      Tensor kept = device.upload_copy_of(i);
      refreshed_uploads[i] = !kept.defined();
      upload_sources[i] = kept.defined() ? kept
                                         : Tensor::empty(masters[i].shape(), device.compute_dtype(),
                                                         device.host_memory());
    }
  }
  staged = std::make_unique<StagedStatesOf>(*this);
}

// Note [Recycled state memory]: within a step's pipeline, a disk stage's
// read takes the memory an earlier disk stage's write-back gave up, of the
// same size (blocks are alike), instead of fresh memory: fresh host memory
// costs a page fault per page on its first touch, which in a VM ran at
// 0.4-0.7 GB/s (core/allocator.cpp), while the 14B's 17 disk stages read
// 28 GB a step. The step's last write-back releases what is left, so
// between steps host memory holds what it held without recycling, and
// within one no more than it did (a read takes recycled memory before
// allocating). Only the states thread touches spare_state_memory.
Tensor StreamingExecutor::Impl::state_memory(const Shape& shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(numel(shape)) * dtype_size(dtype);
  for (auto it = spare_state_memory.begin(); it != spare_state_memory.end(); ++it) {
    if ((*it)->nbytes() != bytes) continue;
    std::shared_ptr<Storage> storage = std::move(*it);
    spare_state_memory.erase(it);
    return Tensor::from_storage(std::move(storage), 0, shape, contiguous_strides(shape), dtype);
  }
  return Tensor::empty(shape, dtype);
}

void StreamingExecutor::Impl::load_states(size_t stage) {
  const auto start = std::chrono::steady_clock::now();
  const StageStates& st = stage_states[stage];
  std::vector<Tensor> fresh;
  int64_t bytes = 0;
  for (size_t k = 0; k < st.handles.size(); ++k) {
    fresh.push_back(state_memory(st.shapes[k], st.dtypes[k]));
    bytes += static_cast<int64_t>(fresh.back().nbytes());
  }
  state_file->read(static_cast<int>(stage), model.stages()[stage]->name(), st.labels, fresh);
  for (size_t k = 0; k < st.handles.size(); ++k) point_at(st.handles[k], fresh[k].storage());
  state_io[stage].read_bytes = bytes;
  state_io[stage].read_s = seconds_since(start);
}

void StreamingExecutor::Impl::evict_states(size_t stage, bool recycle) {
  const auto start = std::chrono::steady_clock::now();
  const StageStates& st = stage_states[stage];
  for (size_t i = stages[stage].first; i < stages[stage].last; ++i)
    if (refreshed_uploads[i]) upload_sources[i].copy_(params[i]);
  std::vector<Tensor> current;
  for (const auto& h : st.handles) current.push_back(h.front());
  state_file->write(static_cast<int>(stage), model.stages()[stage]->name(), st.labels, current);
  std::vector<std::shared_ptr<Storage>> memory;
  int64_t bytes = 0;
  for (const Tensor& t : current) {
    memory.push_back(t.storage());
    bytes += static_cast<int64_t>(t.nbytes());
  }
  current.clear();
  for (const auto& h : st.handles) point_at(h, nullptr);
  state_io[stage].write_bytes = bytes;
  state_io[stage].write_s = seconds_since(start);
  if (!recycle) return;
  // Memory someone else still holds (a view the optimizer kept) is not ours
  // to hand to another stage.
  for (auto& m : memory)
    if (m && m.use_count() == 1 && m->device().is_cpu()) spare_state_memory.push_back(std::move(m));
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
          for (size_t s : disk_stages) {
            bool states_without_memory = false, masters_without_memory = false;
            const StageStates& st = stage_states[s];
            for (size_t k = 0; k < st.handles.size(); ++k) {
              const auto& h = st.handles[k];
              if (h.front().storage()) continue;
              point_at(h, Tensor::empty(h.front().shape(), h.front().dtype()).storage());
              (st.master[k] ? masters_without_memory : states_without_memory) = true;
            }
            if (masters_without_memory) fill_first_masters(s);
            if (states_without_memory)
              for (size_t i = stages[s].first; i < stages[s].last; ++i) optimizer.reset_state(i);
            evict_states(s);
          }
        } catch (...) {
          update_failed("writing every stage's first states to disk");
        }
      })
      .get();
  states_on_disk = true;
}

// The masters of disk stage `s`, just given memory: their values from
// options.fill_masters, and the device's upload copies (the CUDA device's
// pinned bf16 shadows, which it could not fill without them) from those;
// the stand-in's own upload copies are refreshed as the stage is evicted.
void StreamingExecutor::Impl::fill_first_masters(size_t s) {
  LT_CHECK(static_cast<bool>(options.fill_masters), "streaming executor: stage '",
           model.stages()[s]->name(),
           "' has masters without memory, but nothing fills them (StreamingOptions::fill_masters)");
  options.fill_masters(s);
  for (size_t i = stages[s].first; i < stages[s].last; ++i)
    if (!refreshed_uploads[i]) optim::fill_bf16_shadow(params[i], upload_sources[i]);
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
  auto on_disk = [&](const Tensor& t) {
    for (size_t s : disk_stages)
      for (const auto& h : stage_states[s].handles)
        if (h.front().same_impl(t)) return true;
    return false;
  };
  for (const auto& [name, t] : optimizer.state())
    LT_CHECK(t.storage() || on_disk(t), "streaming executor: the optimizer made state '", name,
             "' without memory, but its stage keeps its states in host memory ",
             "(StreamingOptions::states_on_disk)");
}

void StreamingExecutor::Impl::move_all_states(bool to_disk) {
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

void StreamingExecutor::Impl::enqueue_updates_on_disk(double lr, double grad_scale) {
  std::vector<Ticket> updates(stages.size());
  auto write_back = [&](size_t s) {
    updated[s] = state_queue.enqueue([this, s, update = updates[s], trace = tracing()] {
      update.get();  // a failed update is already the executor's failure
      TraceSpan span(trace, "disk", "write states " + model.stages()[s]->name());
      try {
        const bool last = s == disk_stages.back();
        evict_states(s, /*recycle=*/!last);
        if (last) spare_state_memory.clear();
      } catch (...) {
        update_failed("writing back the states of stage '" + model.stages()[s]->name() + "'");
      }
    });
  };
  auto read = [&](size_t s) {
    return state_queue.enqueue([this, s, trace = tracing()] {
      TraceSpan span(trace, "disk", "read states " + model.stages()[s]->name());
      load_states(s);
    });
  };
  // Reads issued so far run kStateReadAhead disk stages ahead of the updates.
  std::vector<Ticket> reads(stages.size());
  size_t next_read = 0;  // into disk_stages
  auto read_up_to = [&](size_t count) {
    for (; next_read < std::min(count, disk_stages.size()); ++next_read) {
      const size_t d = disk_stages[next_read];
      if (next_read >= kStateReadAhead) write_back(disk_stages[next_read - kStateReadAhead]);
      reads[d] = read(d);
    }
  };
  read_up_to(kStateReadAhead);
  size_t disk_index = 0;  // disk stages whose update is queued
  for (size_t s = 0; s < stages.size(); ++s) {
    if (!options.states_on_disk[s]) {
      updated[s] = enqueue_update(s, lr, grad_scale, {});
      continue;
    }
    read_up_to(disk_index + kStateReadAhead);
    updates[s] = enqueue_update(s, lr, grad_scale, std::move(reads[s]));
    state_updated[s] = updates[s];
    ++disk_index;
  }
  const size_t n = disk_stages.size();
  for (size_t k = n > kStateReadAhead ? n - kStateReadAhead : 0; k < n; ++k)
    write_back(disk_stages[k]);
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
  const StageStates& st = stage_states[stage];
  std::vector<Tensor> fresh;
  for (size_t k = 0; k < st.handles.size(); ++k)
    fresh.push_back(Tensor::empty(st.shapes[k], st.dtypes[k]));
  state_queue
      .enqueue([&] {
        state_file->read(static_cast<int>(stage), model.stages()[stage]->name(), st.labels, fresh);
      })
      .get();
  std::map<std::string, Tensor> out;
  for (size_t k = 0; k < fresh.size(); ++k) out.emplace(st.labels[k], std::move(fresh[k]));
  return out;
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

// Resume: the masters are the checkpoint's already (loaded from it, a disk
// stage's as the executor wrote it out); the optimizer states go in
// as optimizer.load_state() would put them, one disk stage at a time.
void StreamingExecutor::Impl::load_optimizer_state(const optim::NamedTensors& state) {
  if (!states_on_disk) return optimizer.load_state(state);
  // The optimizer's own load validates `state` and takes its step counts and
  // the host stages' states. Meanwhile every disk stage's state tensor
  // points at one buffer (the largest one's size) that it overwrites in
  // turn: their parts are written below.
  std::vector<const std::vector<Tensor>*> borrowed;
  size_t largest = 0;
  for (size_t s : disk_stages) {
    const StageStates& st = stage_states[s];
    for (size_t k = 0; k < st.handles.size(); ++k) {
      if (st.master[k]) continue;
      borrowed.push_back(&st.handles[k]);
      largest = std::max(largest, st.handles[k].front().nbytes());
    }
  }
  const Tensor buffer = Tensor::empty({static_cast<int64_t>(largest)}, DType::U8);
  for (const auto* h : borrowed) point_at(*h, buffer.storage());
  try {
    optimizer.load_state(state);
  } catch (...) {
    for (const auto* h : borrowed) point_at(*h, nullptr);
    throw;
  }
  for (const auto* h : borrowed) point_at(*h, nullptr);
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : state) by_name.emplace(name, &t);
  for (size_t s : disk_stages) {
    const StageStates& st = stage_states[s];
    std::map<std::string, Tensor> tensors = read_stage(s);
    std::vector<Tensor> ordered;
    for (size_t k = 0; k < st.labels.size(); ++k) {
      Tensor& t = tensors.at(st.labels[k]);
      if (!st.master[k]) t.copy_(*by_name.at(st.labels[k]));
      ordered.push_back(t);
    }
    state_queue
        .enqueue([&] {
          state_file->write(static_cast<int>(s), model.stages()[s]->name(), st.labels, ordered);
        })
        .get();
  }
}

}  // namespace lt::exec
