// exec.state_placement for the streaming executor: where the f32 masters
// and the optimizer states live between their stage's updates.
#include <algorithm>
#include <map>

#include "exec/memory_budget.h"
#include "exec/streaming_impl.h"

namespace lt::exec {

// Note [Stage states on disk]
// With StatePlacement::Disk, a stage's f32 masters and its optimizer states
// (adamw: m and v; adamw8bit: codes and scales, and its small tensors' m and
// v) are in host memory only around that stage's update; in between they
// sit in the stage's region of one StageStateFile, checked by checksum on
// every read.
//
// - Which memory: the optimizer's state() tensors are live handles, and the
//   masters are the model's parameter tensors. Evicting a stage writes each
//   tensor's bytes, then points every handle of that memory (the model's
//   parameter, the executor's `masters` and `norm_views` handles, the
//   optimizer's state tensor) at no storage, which frees it; loading
//   allocates fresh memory, reads into it and points the handles back. So
//   the optimizers need no change: they update the same tensors, bit for
//   bit as with the states in host memory.
// - The upload: load() copies weights from `upload_sources`, which with
//   states on disk is a host copy of each master in the compute dtype: the
//   device's own where it keeps one that the optimizer writes (the CUDA
//   device's pinned bf16 shadows, 2 bytes a parameter), else ours (the
//   stand-in's f32), refreshed from the master just before it is evicted.
// - The pipeline, per step (enqueue_updates_on_disk): one "states" thread
//   runs the reads and the write-backs in one FIFO order,
//     R0 R1 W0 R2 W1 R3 ... W(n-1),
//   where Rs loads stage s, Us (the optimizer thread) waits for Rs and
//   updates, and Ws waits for Us, refreshes the upload copies, writes the
//   stage back and frees it. So stage s's update waits only for its own
//   read, reads run kStateReadAhead stages ahead of the updates, and at most
//   kStateReadAhead + 1 stages' states are in host memory at once. Each wait
//   points at an earlier task (Ws -> Us -> Rs, Rs after W(s-2) in the FIFO),
//   so nothing waits in a cycle. updated[s] is Ws: the next step's forward
//   of stage s (which binds the model's parameters to device copies) starts
//   only when stage s's memory is no longer being swapped.
// - Between steps every stage is on disk. sync() (before a checkpoint or an
//   evaluation) reads them all back, so the model and state() are whole and
//   checkpoints stay Hugging Face folders written from host memory; the next
//   step() writes them all out again first. The executor's destructor also
//   reads them back (the model outlives it). The first step() writes them
//   all out too, after the trainer's load_state() on resume: a resume
//   rebuilds the scratch file from the checkpoint.
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

StatePlacement parse_state_placement(const std::string& name, const std::string& where) {
  if (name == "host") return StatePlacement::Host;
  if (name == "disk") return StatePlacement::Disk;
  throw Error(where + ": unknown state placement '" + name + "' (expected host or disk)");
}

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
      LT_CHECK(t.device().is_cpu() && t.is_contiguous(), "exec.state_placement disk: state '", name,
               "' is not a contiguous host tensor: ", t.str());
      states_of[it->second].emplace_back(name, t);
      break;
    }
  }
  stage_states.resize(stages.size());
  upload_sources.clear();
  for (size_t s = 0; s < stages.size(); ++s) {
    StageStates& st = stage_states[s];
    for (size_t i = stages[s].first; i < stages[s].last; ++i) {
      st.labels.push_back(names[i]);
      st.handles.push_back({params[i], masters[i], norm_views[i]});
      for (const auto& [name, t] : states_of[i]) {
        st.labels.push_back(name);
        st.handles.push_back({t});
      }
    }
    for (const auto& h : st.handles) {
      st.shapes.push_back(h.front().shape());
      st.dtypes.push_back(h.front().dtype());
    }
  }
  // The device's own copy where it keeps one the optimizer updates (no
  // second copy, nothing to refresh); else one of ours, refreshed from the
  // master before each eviction.
  refreshed_uploads.clear();
  for (const Tensor& m : masters) {
    Tensor kept = device.upload_copy_of(m);
    refreshed_uploads.push_back(!kept.defined());
    upload_sources.push_back(
        kept.defined() ? kept
                       : Tensor::empty(m.shape(), device.compute_dtype(), device.host_memory()));
  }
}

void StreamingExecutor::Impl::load_states(size_t stage) {
  const StageStates& st = stage_states[stage];
  std::vector<Tensor> fresh;
  for (size_t k = 0; k < st.handles.size(); ++k)
    fresh.push_back(Tensor::empty(st.shapes[k], st.dtypes[k]));
  state_file->read(static_cast<int>(stage), model.stages()[stage]->name(), st.labels, fresh);
  for (size_t k = 0; k < st.handles.size(); ++k) point_at(st.handles[k], fresh[k].storage());
}

void StreamingExecutor::Impl::evict_states(size_t stage) {
  const StageStates& st = stage_states[stage];
  for (size_t i = stages[stage].first; i < stages[stage].last; ++i)
    if (refreshed_uploads[i]) upload_sources[i].copy_(params[i]);
  std::vector<Tensor> current;
  for (const auto& h : st.handles) current.push_back(h.front());
  state_file->write(static_cast<int>(stage), model.stages()[stage]->name(), st.labels, current);
  current.clear();
  for (const auto& h : st.handles) point_at(h, nullptr);
}

void StreamingExecutor::Impl::move_all_states(bool to_disk) {
  state_queue
      .enqueue([this, to_disk] {
        try {
          for (size_t s = 0; s < stages.size(); ++s) to_disk ? evict_states(s) : load_states(s);
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
  const size_t n = stages.size();
  std::vector<Ticket> updates(n);
  auto write_back = [&](size_t s) {
    updated[s] = state_queue.enqueue([this, s, update = updates[s], trace = tracing()] {
      update.get();  // a failed update is already the executor's failure
      TraceSpan span(trace, "disk", "write states " + model.stages()[s]->name());
      try {
        evict_states(s);
      } catch (...) {
        update_failed("writing back the states of stage '" + model.stages()[s]->name() + "'");
      }
    });
  };
  for (size_t s = 0; s < n; ++s) {
    if (s >= kStateReadAhead) write_back(s - kStateReadAhead);
    Ticket read = state_queue.enqueue([this, s, trace = tracing()] {
      TraceSpan span(trace, "disk", "read states " + model.stages()[s]->name());
      load_states(s);
    });
    updates[s] = enqueue_update(s, lr, grad_scale, std::move(read));
  }
  for (size_t s = n > kStateReadAhead ? n - kStateReadAhead : 0; s < n; ++s) write_back(s);
}

}  // namespace lt::exec
