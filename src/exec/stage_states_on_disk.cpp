#include "exec/stage_states_on_disk.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "exec/parameter_states.h"
#include "optim/shadow.h"

namespace lt::exec {

namespace {

void point_at(const std::vector<Tensor>& handles, std::shared_ptr<Storage> storage) {
  for (const Tensor& h : handles) {
    h.impl()->storage = storage;
    h.impl()->offset = 0;
  }
}

}  // namespace

StageStatesOnDisk::StageStatesOnDisk(const StageStateFile::Options& file, std::vector<Stage> stages,
                                     const std::vector<bool>& on_disk,
                                     const std::vector<std::string>& names,
                                     const std::vector<std::vector<Tensor>>& masters,
                                     const optim::NamedTensors& optimizer_state,
                                     StreamingDevice& device, WorkQueue& queue)
    : file_(std::make_unique<StageStateFile>(file)), stages_(std::move(stages)), queue_(queue) {
  remove_stale_state_files(file.directory);  // ours is locked, so it stays
  LT_CHECK(on_disk.size() == stages_.size() && masters.size() == names.size(),
           "exec.state_placement disk: ", on_disk.size(), " placements for ", stages_.size(),
           " stages, ", masters.size(), " masters for ", names.size(), " parameters");
  for (size_t s = 0; s < on_disk.size(); ++s)
    if (on_disk[s]) disk_stages_.push_back(s);
  const std::vector<optim::NamedTensors> states_of = states_by_parameter(names, optimizer_state);
  for (const auto& states : states_of) {
    for (const auto& [name, t] : states) {
      // A state made without memory (the optimizer's states_without_memory)
      // gets it stage by stage (give_memory).
      LT_CHECK(!t.storage() || (t.device().is_cpu() && t.is_contiguous()),
               "exec.state_placement disk: state '", name,
               "' is not a contiguous host tensor: ", t.str());
    }
  }
  states_.resize(stages_.size());
  reads_.resize(stages_.size());
  ours_.assign(names.size(), false);
  for (const auto& m : masters) upload_sources_.push_back(m.front());
  for (size_t s : disk_stages_) {
    Tensors& st = states_[s];
    for (size_t i = stages_[s].first; i < stages_[s].last; ++i) {
      st.master_at.push_back(st.handles.size());
      st.labels.push_back(names[i]);
      st.handles.push_back(masters[i]);
      st.master.push_back(true);
      for (const auto& [name, t] : states_of[i]) {
        st.labels.push_back(name);
        st.handles.push_back({t});
        st.master.push_back(false);
      }
      // The device's own copy where it keeps one the optimizer updates (no
      // second copy, nothing to refresh); else one of ours.
      const Tensor kept = device.upload_copy_of(i);
      ours_[i] = !kept.defined();
      upload_sources_[i] = kept.defined()
                               ? kept
                               : Tensor::empty(masters[i].front().shape(), device.compute_dtype(),
                                               device.host_memory());
    }
    for (const auto& h : st.handles) {
      st.shapes.push_back(h.front().shape());
      st.dtypes.push_back(h.front().dtype());
    }
  }
}

bool StageStatesOnDisk::placed(size_t stage) const {
  return std::binary_search(disk_stages_.begin(), disk_stages_.end(), stage);
}

bool StageStatesOnDisk::holds(const Tensor& state) const {
  for (size_t s : disk_stages_)
    for (const auto& h : states_[s].handles)
      if (h.front().same_impl(state)) return true;
  return false;
}

// Note [Recycled state memory] (exec/streaming_states.cpp).
Tensor StageStatesOnDisk::memory_for(const Shape& shape, DType dtype) {
  const size_t bytes = static_cast<size_t>(numel(shape)) * dtype_size(dtype);
  for (auto it = spare_.begin(); it != spare_.end(); ++it) {
    if ((*it)->nbytes() != bytes) continue;
    std::shared_ptr<Storage> storage = std::move(*it);
    spare_.erase(it);
    return Tensor::from_storage(std::move(storage), 0, shape, contiguous_strides(shape), dtype);
  }
  return Tensor::empty(shape, dtype);
}

StageStatesOnDisk::Io StageStatesOnDisk::load(size_t stage) {
  read_ahead(stage);
  return attach(stage);
}

void StageStatesOnDisk::read_ahead(size_t stage) {
  const auto start = std::chrono::steady_clock::now();
  const Tensors& st = states_.at(stage);
  Read& read = reads_.at(stage);
  LT_CHECK(!read.done, "exec.state_placement: the states of stage '", stages_[stage].name,
           "' were read twice without being used");
  std::vector<Tensor> fresh;
  Io io;
  for (size_t k = 0; k < st.handles.size(); ++k) {
    fresh.push_back(memory_for(st.shapes[k], st.dtypes[k]));
    io.bytes += static_cast<int64_t>(fresh.back().nbytes());
  }
  file_->read(static_cast<int>(stage), stages_[stage].name, st.labels, fresh);
  io.seconds = seconds_since(start);
  read = {true, std::move(fresh), io};
}

StageStatesOnDisk::Io StageStatesOnDisk::attach(size_t stage) {
  const Tensors& st = states_.at(stage);
  Read& read = reads_.at(stage);
  LT_CHECK(read.done, "exec.state_placement: the states of stage '", stages_[stage].name,
           "' are used before they were read");
  for (size_t k = 0; k < st.handles.size(); ++k) point_at(st.handles[k], read.tensors[k].storage());
  const Io io = read.io;
  read = Read();
  return io;
}

void StageStatesOnDisk::drop_reads() {
  for (Read& read : reads_) read = Read();
}

void StageStatesOnDisk::refresh_our_copies(size_t stage,
                                           const std::function<Tensor(size_t)>& master_of) {
  for (size_t i = stages_[stage].first; i < stages_[stage].last; ++i)
    if (ours_[i]) upload_sources_[i].copy_(master_of(i));
}

StageStatesOnDisk::Io StageStatesOnDisk::evict(size_t stage, bool recycle) {
  const auto start = std::chrono::steady_clock::now();
  const Tensors& st = states_.at(stage);
  std::vector<Tensor> current;
  for (const auto& h : st.handles) current.push_back(h.front());
  refresh_our_copies(stage,
                     [&](size_t i) { return current[st.master_at[i - stages_[stage].first]]; });
  file_->write(static_cast<int>(stage), stages_[stage].name, st.labels, current);
  std::vector<std::shared_ptr<Storage>> memory;
  Io io;
  for (const Tensor& t : current) {
    memory.push_back(t.storage());
    io.bytes += static_cast<int64_t>(t.nbytes());
  }
  current.clear();
  for (const auto& h : st.handles) point_at(h, nullptr);
  io.seconds = seconds_since(start);
  if (!recycle) return io;
  // Memory someone else still holds (a view the optimizer kept) is not ours
  // to hand to another stage.
  for (auto& m : memory)
    if (m && m.use_count() == 1 && m->device().is_cpu()) spare_.push_back(std::move(m));
  return io;
}

void StageStatesOnDisk::write_out_first(optim::Optimizer& optimizer,
                                        const std::function<void(size_t)>& fill_masters) {
  for (size_t s : disk_stages_) {
    const Tensors& st = states_[s];
    bool masters = false, states = false;
    for (size_t k = 0; k < st.handles.size(); ++k) {
      const auto& h = st.handles[k];
      if (h.front().storage()) continue;
      point_at(h, Tensor::empty(h.front().shape(), h.front().dtype()).storage());
      (st.master[k] ? masters : states) = true;
    }
    if (masters) {
      fill_masters(s);
      for (size_t i = stages_[s].first; i < stages_[s].last; ++i)
        if (!ours_[i])
          optim::fill_bf16_shadow(st.handles[st.master_at[i - stages_[s].first]].front(),
                                  upload_sources_[i]);
    }
    if (states)
      for (size_t i = stages_[s].first; i < stages_[s].last; ++i) optimizer.reset_state(i);
    evict(s);
  }
}

std::map<std::string, Tensor> StageStatesOnDisk::read(size_t stage) {
  LT_CHECK(placed(stage), "exec.state_placement: stage ", stage, " has no states on disk to read");
  const Tensors& st = states_[stage];
  std::vector<Tensor> fresh;
  // Host memory, named: the caller may be inside a device's compute scope.
  for (size_t k = 0; k < st.handles.size(); ++k)
    fresh.push_back(Tensor::empty(st.shapes[k], st.dtypes[k], cpu_allocator()));
  queue_
      .enqueue([&] { file_->read(static_cast<int>(stage), stages_[stage].name, st.labels, fresh); })
      .get();
  std::map<std::string, Tensor> out;
  for (size_t k = 0; k < fresh.size(); ++k) out.emplace(st.labels[k], std::move(fresh[k]));
  return out;
}

void StageStatesOnDisk::write(size_t stage, const std::map<std::string, Tensor>& tensors) {
  const Tensors& st = states_.at(stage);
  std::vector<Tensor> ordered;
  for (const std::string& label : st.labels) ordered.push_back(tensors.at(label));
  queue_
      .enqueue([&] {
        refresh_our_copies(
            stage, [&](size_t i) { return ordered[st.master_at[i - stages_[stage].first]]; });
        file_->write(static_cast<int>(stage), stages_[stage].name, st.labels, ordered);
      })
      .get();
}

void StageStatesOnDisk::load_optimizer_state(optim::Optimizer& optimizer,
                                             const optim::NamedTensors& state) {
  // The optimizer's own load validates `state` and takes its step counts and
  // the host stages' states. Meanwhile every disk stage's state tensor
  // points at one buffer (the largest one's size) that it overwrites in
  // turn: their parts are written below.
  std::vector<const std::vector<Tensor>*> borrowed;
  size_t largest = 0;
  for (size_t s : disk_stages_) {
    const Tensors& st = states_[s];
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
  for (size_t s : disk_stages_) {
    const Tensors& st = states_[s];
    std::map<std::string, Tensor> tensors = read(s);
    for (size_t k = 0; k < st.labels.size(); ++k)
      if (!st.master[k]) tensors.at(st.labels[k]).copy_(*by_name.at(st.labels[k]));
    write(s, tensors);
  }
}

StagedStatesOnDisk::StagedStatesOnDisk(StageStatesOnDisk& disk, optim::Optimizer& optimizer,
                                       size_t stage_count, std::function<bool()> on_disk_now,
                                       std::function<std::shared_ptr<void>(size_t)> bring_in)
    : disk_(disk),
      optimizer_(optimizer),
      stage_count_(stage_count),
      on_disk_now_(std::move(on_disk_now)),
      bring_in_(std::move(bring_in)) {}

std::vector<bool> StagedStatesOnDisk::on_disk() const {
  std::vector<bool> out(stage_count_);
  for (size_t s = 0; s < out.size(); ++s) out[s] = on_disk_now_() && disk_.placed(s);
  return out;
}

std::map<std::string, Tensor> StagedStatesOnDisk::read(size_t stage) {
  LT_CHECK(on_disk_now_(), "exec.state_placement: stage ", stage,
           " is in host memory now, not on disk");
  return disk_.read(stage);
}

// Resume: the masters are the checkpoint's already (loaded from it, a disk
// stage's as the executor wrote it out); the optimizer states go in as
// optimizer.load_state() would put them, one disk stage at a time.
void StagedStatesOnDisk::load_optimizer_state(const optim::NamedTensors& state) {
  if (!on_disk_now_()) return optimizer_.load_state(state);
  disk_.load_optimizer_state(optimizer_, state);
}

QueuedUpdates queue_updates_through_disk(size_t stage_count, const std::vector<size_t>& disk_stages,
                                         size_t read_ahead,
                                         const std::function<Ticket(size_t)>& read,
                                         const std::function<Ticket(size_t, Ticket)>& update,
                                         const std::function<Ticket(size_t, Ticket)>& write_back) {
  QueuedUpdates q;
  q.updated.resize(stage_count);
  q.written.resize(stage_count);
  std::vector<Ticket> reads(stage_count);
  size_t next_read = 0;  // into disk_stages
  auto read_up_to = [&](size_t count) {
    for (; next_read < std::min(count, disk_stages.size()); ++next_read) {
      const size_t d = disk_stages[next_read];
      if (next_read >= read_ahead) {
        const size_t w = disk_stages[next_read - read_ahead];
        q.written[w] = write_back(w, q.updated[w]);
      }
      reads[d] = read(d);
    }
  };
  read_up_to(read_ahead);
  size_t disk_index = 0;  // disk stages whose update is queued
  for (size_t s = 0; s < stage_count; ++s) {
    if (!std::binary_search(disk_stages.begin(), disk_stages.end(), s)) {
      q.updated[s] = update(s, Ticket());
      continue;
    }
    read_up_to(disk_index + read_ahead);
    q.updated[s] = update(s, std::move(reads[s]));
    ++disk_index;
  }
  const size_t n = disk_stages.size();
  for (size_t k = n > read_ahead ? n - read_ahead : 0; k < n; ++k)
    q.written[disk_stages[k]] = write_back(disk_stages[k], q.updated[disk_stages[k]]);
  return q;
}

}  // namespace lt::exec
