// ZenFlow's step (exec/offload.h).
//
// Note [ZenFlow's window]
// Steps are grouped in windows; a window ends after update_interval steps
// (or by the auto rule, zenflow_policy.h). Per step, after the backward:
//  1. At a window's start, when a reselection is due (the first ZenFlow
//     step, then every select_interval_steps): the pending CPU update is
//     waited for and merged, the device's columns are written into the
//     host masters, and each 2-D weight's top-k columns by the L1 norm of
//     this step's gradient become the device's, their masters gathered from
//     the host and their moments starting at zero.
//  2. The device updates its columns (and every 1-D parameter) with AdamW,
//     writes them into the compute weights, and zeroes their gradient. The
//     clip scale is from the norm of exactly these gradients (what the
//     device updates); it is the step's logged grad_norm.
//  3. The other columns' gradients stay where autograd put them, so they
//     add up over the window on the device, in the gradients' own dtype
//     (bf16 on a GPU; ours: DeepSpeed copies every step's gradient to the
//     host and adds there, which costs a pass over host memory per step
//     and the full gradient over PCIe per step, more than the 87 GB/s host
//     of the H200 machine can give beside the CPU optimizer).
//  4. At a window's end they are copied to the host once, and the CPU
//     optimizer applies their mean over the window's steps to the whole
//     f32 master, clipped by that mean's norm, at the window's last rate.
//     The device-owned columns had zero gradient there; the CPU's values
//     for them are never used (the device's overwrite them at every merge
//     and write-back).
//  5. The update's result (the bf16 shadow it writes) is uploaded over the
//     weights the CPU updates: at once without overlap_step; with it, at
//     the end of the next window (one window late), the update having run
//     beside that window's steps. The device's columns are scattered back
//     over the upload before the next forward.
// A non-finite step drops the open window (its gradients are summed in).
//
// Note [ZenFlow's early download]
// The window's download (the model's size in bf16: 6.2 GB, 0.12 s for a 3B
// on the H200) was waited for at the window's end, since in a 24 GB budget
// the next backward's gradients cannot exist beside the old ones: 8% of the
// 3B's steps over a window of 4. Two moves hide it:
//  - When the window's end is known before the step (update_interval
//    fixed, columns chosen), the last backward's grad-ready hooks take each
//    gradient as it becomes final: its device columns gathered (the
//    device's update reads them) and zeroed, then the copy queued after
//    them on the compute stream, while the backward goes on.
//  - The download is waited for, and the device's gradients dropped, only
//    before the next step's first backward (settle_downloads): its first
//    forward runs meanwhile. The CPU update waits for the download itself.
// The values are those of the late download: the same gathers and zeroing,
// in the same stream order.
//
// Note [ZenFlow's early merge]
// With overlap_step, a window's end also merges the previous window's CPU
// update: its result uploaded over the device weights (the model's size
// in bf16 again), then the device's columns scattered back over it. Queued
// after the backward, the upload was waited for before the next forward:
// 0.11 s, a third of a 3B step, every window. But a weight whose gradient
// is final is not read again in this step (every use of it in the backward
// fed that gradient), so the last backward's grad-ready hooks queue its
// upload right there, in batches of ~256 MB, after the CPU update (already
// done by then, a window having passed). The copy engine records the
// compute stream at each call, so an upload lands after the backward's
// last read of what it overwrites. The device's update of its columns,
// written into the weights after the backward, may then race an upload
// of the same weight; the columns are scattered back from their masters
// after every upload has landed and before the next forward reads them
// (rescatter_columns), so the weights hold the late merge's bits.
#include <algorithm>
#include <cmath>

#include "exec/offload_impl.h"
#include "ops/columns.h"
#include "optim/clip.h"

namespace lt::exec {

namespace {

// `t`'s memory as a row-major matrix: a 2-D tensor as it is, any other as
// one row.
Tensor matrix_of(const Tensor& t) {
  const Shape shape = t.dim() == 2 ? t.shape() : Shape{1, t.numel()};
  return Tensor::from_storage(t.storage(), t.offset(), shape, {shape[1], 1}, t.dtype());
}

Tensor index_tensor(const std::vector<int32_t>& cols) {
  return Tensor::from_vector(cols, {static_cast<int64_t>(cols.size())});
}

}  // namespace

void OffloadExecutor::Impl::zenflow_update(const StepOptions& o) {
  // A skipped step that had begun an early merge completes it here (its
  // uploads have overwritten device columns), a window before the late
  // merge would: deterministic, but not the late path's bits.
  if (merging_early && (!std::isfinite(stats->loss) || stats->target_count == 0))
    merge_cpu_update();
  if (!std::isfinite(stats->loss)) {
    stats->skipped = true;
    for (auto& [name, p] : selected) p.set_grad(Tensor());
    drop_device_gradients();
    window_steps = 0;
    return;
  }
  if (stats->target_count == 0) return;
  if (window_steps == 0 && (columns.empty() || steps >= next_select_step)) select_columns();
  auto scope = device->compute_scope();
  for (size_t i = 0; i < weights.size(); ++i) {
    if (taken_early[i]) continue;  // gathered by its hook
    const Tensor& g = weights[i].grad();
    selected[i].second.set_grad(g.defined() ? ops::gather_columns(matrix_of(g), columns[i].device)
                                            : Tensor());
  }
  selected_norm->begin();
  selected_norm->finish();
  device->finish_compute();
  stats->grad_norm = std::sqrt(selected_norm->squared_sum());
  if (!std::isfinite(stats->grad_norm)) {
    if (merging_early) merge_cpu_update();
    stats->skipped = true;
    for (auto& [name, p] : selected) p.set_grad(Tensor());
    drop_device_gradients();
    window_steps = 0;
    return;
  }
  // The auto rule compares this step's device-owned mass with the mass
  // accumulated for the CPU: taken before the device's columns are zeroed.
  const ZenFlowOptions& zo = options.zenflow_options;
  const bool end = zo.update_interval > 0 ? window_steps + 1 >= zo.update_interval
                                          : window_should_end(column_masses());
  device_adam->update(o.lr, optim::clip_scale(stats->grad_norm, o.max_grad_norm), 0,
                      selected.size());
  device_adam->finish_step();
  for (size_t i = 0; i < weights.size(); ++i) {
    const Columns& c = columns[i];
    Tensor& master = selected[i].second;
    if (!master.grad().defined()) continue;
    master.set_grad(Tensor());
    ops::scatter_columns(matrix_of(weights[i]), master, c.device);
    if (c.whole) {
      weights[i].set_grad(Tensor());
    } else if (!taken_early[i]) {
      ops::zero_columns(matrix_of(weights[i].grad()), c.device);
    }
  }
  ++window_steps;
  window_lr = o.lr;
  window_max_grad_norm = o.max_grad_norm;
  if (end)
    end_window();
  else
    keep_window_sums_on_rank_zero();
}

bool OffloadExecutor::Impl::window_end_known() const {
  const ZenFlowOptions& zo = options.zenflow_options;
  const bool selecting = window_steps == 0 && (columns.empty() || steps >= next_select_step);
  return zo.update_interval > 0 && window_steps + 1 >= zo.update_interval && !selecting;
}

void OffloadExecutor::Impl::take_gradient_early(size_t i) {
  const Tensor& g = weights[i].grad();
  if (!g.defined()) return;
  if (zen_step) {
    const Columns& c = columns[i];
    if (c.whole) return;  // the device updates it all: nothing goes to the host
    // The device's columns are gathered and zeroed before the copy reads
    // the gradient, in the compute stream's order, as zenflow_update would.
    selected[i].second.set_grad(ops::gather_columns(matrix_of(g), c.device));
    ops::zero_columns(matrix_of(g), c.device);
  }
  taken_early[i] = 1;
  pending_downloads.push_back(download_gradients(i, i + 1, zen_step ? buffer : 0, "grads"));
  if (merging_early) merge_early(i);
}

void OffloadExecutor::Impl::begin_early_merge() {
  if (!merge_due || !window_end_known()) return;
  merging_early = true;
  merged_early.assign(weights.size(), 0);
}

void OffloadExecutor::Impl::merge_early(size_t i) {
  // What merge_cpu_update would upload for i: the set its update read.
  if (columns[i].whole || !slab_filled[1 - buffer][i] || merged_early[i]) return;
  merged_early[i] = 1;
  early_merge_batch.push_back(i);
  early_merge_batch_bytes += static_cast<int64_t>(weights[i].nbytes());
  constexpr int64_t kBatchBytes = int64_t{256} << 20;
  if (early_merge_batch_bytes >= kBatchBytes) flush_early_merge();
}

void OffloadExecutor::Impl::flush_early_merge() {
  if (early_merge_batch.empty()) return;
  early_merge_uploads.push_back(upload_weights(early_merge_batch, cpu_update, "merge"));
  early_merge_batch.clear();
  early_merge_batch_bytes = 0;
}

std::vector<ColumnMass> OffloadExecutor::Impl::column_masses() const {
  std::vector<ColumnMass> out;
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor& g = weights[i].grad();
    if (columns[i].whole || !g.defined()) continue;
    const std::vector<float> sums =
        ops::column_abs_sums(matrix_of(g)).to(Device::cpu()).to_vector<float>();
    ColumnMass m;
    for (int32_t c : columns[i].host) m.selected += sums[static_cast<size_t>(c)];
    for (float s : sums) m.unselected += s;
    m.unselected -= m.selected;
    out.push_back(m);
  }
  return out;
}

void OffloadExecutor::Impl::select_columns() {
  // The masters must hold every update before the device's columns are
  // read from them: the CPU update merged, and (on the stand-in, whose
  // uploads read the masters themselves) its uploads done.
  if (merge_due) merge_cpu_update();
  wait_uploads();
  if (!columns.empty()) {
    if (rescatter_due) rescatter_columns();
    write_back_columns();
  }
  const ZenFlowOptions& z = options.zenflow_options;
  auto scope = device->compute_scope();
  const Device where = device->memory().device();
  columns.assign(weights.size(), Columns{});
  selected.clear();
  for (size_t i = 0; i < weights.size(); ++i) {
    Columns& c = columns[i];
    const Tensor w = matrix_of(weights[i]);
    const int64_t width = w.size(1);
    const int64_t k = selected_count(width, z.topk_ratio);
    const Tensor& g = weights[i].grad();
    c.whole = weights[i].dim() != 2 || k == width || !g.defined();
    if (saved_selection) {
      c.host = saved_selection->columns[i];
      c.whole = weights[i].dim() != 2 || static_cast<int64_t>(c.host.size()) == width;
    } else if (c.whole) {
      c.host.resize(static_cast<size_t>(width));
      for (int64_t j = 0; j < width; ++j) c.host[static_cast<size_t>(j)] = static_cast<int32_t>(j);
    } else {
      c.host =
          top_columns(ops::column_abs_sums(matrix_of(g)).to(Device::cpu()).to_vector<float>(), k);
    }
    c.device = index_tensor(c.host).to(where);
  }
  // The masters of the chosen columns (a disk stage's read from its file).
  with_stage_masters(/*write=*/false, [&](size_t s, const std::vector<Tensor>& own) {
    for (size_t i = stages[s].first; i < stages[s].last; ++i)
      columns[i].master =
          ops::gather_columns(matrix_of(own[i - stages[s].first]), index_tensor(columns[i].host))
              .to(where);
  });
  for (size_t i = 0; i < weights.size(); ++i) selected.emplace_back(names[i], columns[i].master);
  device_adam = std::make_unique<optim::AdamW>(selected, options.adam, options.no_decay);
  selected_norm = std::make_unique<optim::GradNormPartials>(selected);
  next_select_step = steps + select_interval_steps(z);
  if (saved_selection) {  // the checkpoint's moments, and its next reselection
    device_adam->load_state(saved_selection->device_state);
    next_select_step = saved_selection->next_select_step;
    saved_selection.reset();
  }
}

void OffloadExecutor::Impl::end_window() {
  // The previous window's update must be on the device before this one's
  // starts: both write the shadows the merge uploads.
  if (merge_due) merge_cpu_update();
  const int set = buffer;
  buffer = 1 - buffer;
  norm->begin();
  norm->finish();
  device->finish_compute();
  if (stats) stats->zenflow_window_steps = window_steps;
  const double steps_in_window = static_cast<double>(window_steps);
  const double mean_norm = std::sqrt(norm->squared_sum()) / steps_in_window;
  window_steps = 0;
  if (!std::isfinite(mean_norm)) {
    drop_device_gradients();
    return;
  }
  const double scale = optim::clip_scale(mean_norm, window_max_grad_norm) / steps_in_window;
  // The gradients the last backward's hooks took are on their way already.
  for (const StageRange& r : stages)
    pending_downloads.push_back(download_gradients(r.first, r.last, set, "grads",
                                                   [&](size_t i) { return !taken_early[i]; }));
  // The device's gradients are dropped once copied out, before the next
  // backward makes fresh ones (settle_downloads), so that both never exist
  // at once; the next step's first forward runs meanwhile.
  drop_due = true;
  // The update reads the slabs, and writes the shadows the last merge's
  // uploads read.
  std::vector<Ticket> before = uploaded;
  before.insert(before.end(), early_merge_uploads.begin(), early_merge_uploads.end());
  before.insert(before.end(), pending_downloads.begin(), pending_downloads.end());
  Ticket uploads_done = optimizer_queue.enqueue([before] {
    for (const Ticket& t : before) t.get();
  });
  // The merge waits on cpu_update, which waits on every stage's update (and
  // a disk stage's write-back) by its ticket: a failed update, read or
  // write-back is then the merge's error, not a stale stage merged without
  // a word (OffloadStates.ZenFlowStopsAtTheMergeOfAWindowWhoseUpdateFailed).
  if (!disk_states) {
    const Ticket updated = update_on_host(0, weights.size(), set, window_lr, scale, uploads_done);
    cpu_update = optimizer_queue.enqueue([this, updated] {
      updated.get();
      optimizer.finish_step();
    });
  } else {
    // Stage by stage (the optimizer thread runs uploads_done first); the
    // states thread runs the disk stages' write-backs before this ticket,
    // and the optimizer thread every update before `finished`.
    std::vector<Ticket> stages_done;
    update_stages(set, window_lr, scale,
                  [&](size_t, Ticket done) { stages_done.push_back(std::move(done)); });
    const Ticket finished = optimizer_queue.enqueue([this, stages_done] {
      for (const Ticket& t : stages_done) t.get();
      optimizer.finish_step();
    });
    cpu_update = state_queue.enqueue([finished] { finished.get(); });
  }
  merge_due = true;
  if (!options.zenflow_options.overlap_step) merge_cpu_update();
}

void OffloadExecutor::Impl::merge_cpu_update() {
  flush_early_merge();
  stats->optimizer_s += wait_seconds(cpu_update);
  count_state_io();  // the update's reads and write-backs, done by now
  merge_due = false;
  const int set = 1 - buffer;  // the set the merged update read
  auto already = [&](size_t i) { return merging_early && merged_early[i]; };
  for (size_t s = 0; s < stages.size(); ++s) {
    uploaded[s] = upload_weights(
        stages[s].first, stages[s].last, uploaded[s], "merge",
        [&](size_t i) { return !columns[i].whole && slab_filled[set][i] && !already(i); });
  }
  merging_early = false;
  rescatter_due = true;
}

void OffloadExecutor::Impl::rescatter_columns() {
  rescatter_due = false;
  if (columns.empty()) return;
  auto scope = device->compute_scope();
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!columns[i].whole)
      ops::scatter_columns(matrix_of(weights[i]), columns[i].master, columns[i].device);
  }
}

void OffloadExecutor::Impl::write_back_columns() {
  // A disk stage's masters are read, changed and written back in turn.
  with_stage_masters(/*write=*/true, [&](size_t s, const std::vector<Tensor>& own) {
    for (size_t i = stages[s].first; i < stages[s].last; ++i) {
      const Columns& c = columns[i];
      ops::scatter_columns(matrix_of(own[i - stages[s].first]), c.master.to(Device::cpu()),
                           index_tensor(c.host));
    }
  });
}

void OffloadExecutor::Impl::finish_masters() {
  if (!options.zenflow) return;
  if (window_steps > 0) {
    if (options.ranks) sum_window_over_ranks();  // Note [ZenFlow over ranks]
    end_window();
  }
  if (merge_due) merge_cpu_update();
  wait_uploads();
  if (columns.empty()) return;
  if (rescatter_due) rescatter_columns();
  // The device keeps its columns and their moments (Note [ZenFlow's saves]).
  write_back_columns();
}

}  // namespace lt::exec
