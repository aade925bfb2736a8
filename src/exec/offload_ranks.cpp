// Data parallel for the synchronous offload executor (docs/distributed.md),
// with or without ZeRO-1 (exec/zero_optimizer.h). One step, every rank:
//
//  1. the global batch's target count summed over the ranks, the loss's
//     denominator (as the resident executor does);
//  2. forward and backward on this rank's shard on the device weights; as
//     the last backward makes a stage's gradients final, they are reduced
//     over the ranks *on the device*, before the download, behind the
//     rest of the backward (Note [Offload reduces behind the backward];
//     CrossRankSum: NCCL on GPUs, MPI on the CPU, where the stand-in
//     device's memory is host memory: the CPU tests run the code a GPU
//     rank runs): all-reduced and downloaded into the slabs (each rank
//     updates every master with the same sums), or with ZeRO-1 (one group
//     per stage, streaming_zero_groups) laid into a device buffer in the
//     stage's flat layout and reduce-scattered, each rank downloading only
//     its shard (widened to f32 on the host);
//  3. which parameters have a gradient (on any rank), the loss and token
//     counts summed (and under ZeRO-1 the shards' squares); a parameter
//     with a gradient elsewhere but not here added zeros, one with a
//     gradient on no rank is skipped by the optimizer as on one process;
//  4. the gradient norm taken of the sums, so clipping and the skip of a
//     non-finite step agree on every rank;
//  5. the update (ZeRO-1: of this rank's shard, then the new masters
//     all-gathered and the device's bf16 copies refreshed) and the new
//     weights uploaded from the masters.
#include <chrono>
#include <cmath>

#include "exec/offload_impl.h"
#include "exec/zero_optimizer.h"
#include "ops/index_checks.h"
#include "optim/clip.h"

namespace lt::exec {

namespace {

using Clock = std::chrono::steady_clock;

double squares(const Tensor& t) {
  const Tensor f = t.dtype() == DType::F32 ? t : t.to(DType::F32);
  double s = 0;
  const float* d = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) s += double(d[i]) * double(d[i]);
  return s;
}

}  // namespace

// Note [Offload reduces behind the backward]
// The offload executor runs the whole backward at once, so a stage's end
// is seen through its parameters' grad-ready hooks, armed for the backward
// that makes every gradient final: once every gradient of the last stage
// not yet started is final, its reduce starts (start_sum, or
// start_reduce_scatter under ZeRO-1), and the one started before it is
// finished: waited for and its download queued, as the streaming executor
// does (Note [Reduces behind the backward]). Stages start strictly from
// the last to the first, whatever order the hooks fire in, so that every
// rank starts the same collectives in the same order; a stage with a
// parameter that has no gradient on this rank starts after the backward,
// with zeros for it, and so do the stages before it (every stage, on a
// rank without targets, which runs no backward). A stage's device gradients (ZeRO-1: its flat
// buffer and shard) live until its reduce is finished.
void OffloadExecutor::Impl::arm_reduces() {
  if (stage_of.empty()) {
    // The hooks live in the device weights, which this object owns.
    stage_of.resize(weights.size());
    for (size_t s = 0; s < stages.size(); ++s)
      for (size_t i = stages[s].first; i < stages[s].last; ++i) stage_of[i] = s;
    for (size_t i = 0; i < weights.size(); ++i)
      weights[i].register_grad_ready_hook([this, i](const Tensor&) {
        if (reduces_armed) gradient_ready(i);
      });
  }
  stage_waiting.clear();
  for (const StageRange& r : stages) stage_waiting.push_back(r.last - r.first);
  reduces_armed = true;
}

void OffloadExecutor::Impl::gradient_ready(size_t i) {
  size_t& waiting = stage_waiting[stage_of[i]];
  if (waiting == 0) return;
  --waiting;
  while (stages_started < stages.size() && stage_waiting[stages.size() - 1 - stages_started] == 0)
    start_stage_reduce(stages.size() - 1 - stages_started++);
}

void OffloadExecutor::Impl::start_stage_reduce(size_t s) {
  const StageRange& range = stages[s];
  std::vector<Tensor> grads;  // on the device, one per parameter of the stage
  for (size_t i = range.first; i < range.last; ++i) {
    Tensor g = weights[i].grad();
    has_grad[i] = g.defined();
    if (!g.defined()) {
      g = device->empty(weights[i].shape(), device->compute_dtype());
      g.zero_();
    }
    grads.push_back(g.contiguous());
  }
  if (grads.empty()) return;
  StartedReduce started;
  started.stage = s;
  if (!options.zero) {
    options.ranks->start_sum(grads);
    started.grads = std::move(grads);
  } else {
    ZeroOptimizer& zero = *options.zero;
    const ZeroShards& shards = zero.shards();
    const ZeroGroup& group = shards.groups[zero.group_of(range.first)];
    LT_CHECK(group.first == range.first && group.last == range.last,
             "offload executor: dist.zero 1 needs one ZeRO-1 group per stage "
             "(streaming_zero_groups); parameters [",
             range.first, ", ", range.last, ") lie in the group [", group.first, ", ", group.last,
             ")");
    Tensor flat = device->empty({shards.world * group.shard}, device->compute_dtype());
    flat.zero_();  // the padding adds zeros
    for (size_t i = range.first; i < range.last; ++i) {
      const int64_t at = shards.param_offsets[i] - group.flat;
      const Tensor& g = grads[i - range.first];
      flat.slice(0, at, at + g.numel()).view(g.shape()).copy_(g);
    }
    started.shard = device->empty({group.shard}, device->compute_dtype());
    options.ranks->start_reduce_scatter(flat, started.shard);  // holds `flat` until the wait
  }
  reducing.push_back(std::move(started));
  while (reducing.size() > 1) finish_oldest_stage_reduce();
}

void OffloadExecutor::Impl::finish_oldest_stage_reduce() {
  const StartedReduce r = std::move(reducing.front());
  reducing.pop_front();
  options.ranks->wait_for_oldest_sums(1);
  const StageRange& range = stages[r.stage];
  const std::string label = model.stages()[r.stage]->name();
  CopyList copies;
  std::function<void()> then;
  if (!options.zero) {
    for (size_t i = range.first; i < range.last; ++i) {
      slab_filled[0][i] = 1;
      copies.emplace_back(slabs[0][i], r.grads[i - range.first]);
    }
  } else {
    const Tensor host = options.zero->shard_gradient(options.zero->group_of(range.first));  // f32
    if (r.shard.dtype() == host.dtype()) {
      copies.emplace_back(host, r.shard);
    } else {  // bf16 on a GPU: lands in pinned memory, widened on the host
      Tensor landing = Tensor::empty(r.shard.shape(), r.shard.dtype(), device->host_memory());
      copies.emplace_back(landing, r.shard);
      then = [host, landing] { host.copy_(landing); };
    }
  }
  for (const auto& [to, from] : copies) stats->d2h_bytes += static_cast<int64_t>(from.nbytes());
  pending_downloads.push_back(device->download(std::move(copies), std::move(then),
                                               (options.zero ? "grad shard " : "grads ") + label));
}

int64_t OffloadExecutor::Impl::targets_over_ranks(const std::vector<data::Batch>& micro_batches) {
  double targets = 0;
  for (const auto& mb : micro_batches) targets += static_cast<double>(mb.target_count);
  options.ranks->sum(std::span<double>(&targets, 1));
  return static_cast<int64_t>(targets);
}

// Note [ZenFlow over ranks]
// Every rank runs ZenFlow's step (offload_zenflow.cpp) on the global
// batch's gradient, so that every choice in it (the columns, the clip, a
// skipped step, the auto window's end) and every update is the same on
// every rank, as in one process. After the backward every gradient is
// summed over the ranks in place, which must not count a window's earlier
// steps twice: autograd adds a step's gradient to what the window has
// accumulated on the device. So between steps the window's sums live on
// rank 0 alone: after a step that does not end the window, the other ranks
// zero what they keep (keep_window_sums_on_rank_zero); the next step's sum
// is then rank 0's sums plus every rank's new gradient, the window's sums
// over the global batches. At a window's end every rank holds them, and
// downloads them for its own CPU update of every master; a window that
// ends between steps (a save's or an evaluation's sync) first sums them
// over the ranks, zeros but rank 0's (sum_window_over_ranks). A step
// without targets anywhere adds nothing and sums nothing. The cost is one
// all-reduce of the whole gradient per step, as DDP's; it is not yet
// overlapped with the backward, and the gradients leave for the host only
// after it (not by the early download's hooks).
void OffloadExecutor::Impl::sum_zenflow_step_over_ranks(int64_t targets) {
  CrossRankSum& ranks = *options.ranks;
  // A rank without targets ran no backward, whose first one settles the
  // last window's downloads and drops its gradients.
  settle_downloads();
  std::vector<double> sums(weights.size() + 2);
  for (size_t i = 0; i < weights.size(); ++i) sums[i] = weights[i].grad().defined() ? 1 : 0;
  sums[weights.size()] = stats->loss;
  sums[weights.size() + 1] = static_cast<double>(stats->tokens);
  ranks.sum(sums);
  stats->loss = sums[weights.size()];
  stats->tokens = static_cast<int64_t>(sums[weights.size() + 1]);
  stats->target_count = targets;
  // No rank ran a backward: nothing to add, and zenflow_update returns
  // before its end, so the window's sums must stay on rank 0 alone.
  if (targets == 0) return;
  auto scope = device->compute_scope();
  std::vector<Tensor> grads;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (sums[i] == 0) continue;  // on no rank: none, as in one process
    Tensor g = weights[i].grad();
    if (!g.defined()) {  // zeros where another rank has one
      g = device->empty(weights[i].shape(), device->compute_dtype());
      g.zero_();
    } else if (!g.is_contiguous()) {
      g = g.contiguous();
    }
    weights[i].set_grad(g);
    grads.push_back(g);
  }
  if (!grads.empty()) ranks.sum(grads);
}

void OffloadExecutor::Impl::sum_window_over_ranks() {
  // Every rank holds the same gradients (defined or not) between steps.
  std::vector<Tensor> grads;
  for (const Tensor& w : weights)
    if (w.grad().defined()) grads.push_back(w.grad());
  if (grads.empty()) return;
  auto scope = device->compute_scope();
  options.ranks->sum(grads);
}

void OffloadExecutor::Impl::keep_window_sums_on_rank_zero() {
  if (!options.ranks || options.ranks->rank() == 0) return;
  auto scope = device->compute_scope();
  for (const Tensor& w : weights)
    if (w.grad().defined()) w.grad().zero_();
}

StepStats OffloadExecutor::Impl::run_step_over_ranks(const std::vector<data::Batch>& micro_batches,
                                                     const StepOptions& o) {
  CrossRankSum& ranks = *options.ranks;
  LT_CHECK(!zenflow_step(), "offload executor: ZenFlow's steps over ranks are run_step's");
  if (options.zero) {
    // The host receives only the shard (ZeroOptimizer::shard_gradient), so
    // the executor's own slabs go: nothing reads them under ZeRO-1.
    for (Tensor& slab : slabs[0]) slab = Tensor();
  }
  StepStats st;
  StepRecord record(*this, st);
  wait_uploads();

  const auto compute_start = Clock::now();
  const int64_t targets = targets_over_ranks(micro_batches);
  reducing.clear();  // none left but by a failed step
  stages_started = 0;
  has_grad.assign(masters.size(), 0);
  std::fill(slab_filled[0].begin(), slab_filled[0].end(), 0);
  {
    auto scope = device->compute_scope();
    struct Disarm {
      bool& flag;
      ~Disarm() { flag = false; }
    } disarm{reduces_armed};
    BackwardHooks hooks;
    hooks.before_last_backward = [this] { arm_reduces(); };
    forward_backward(*compute, micro_batches, nullptr, st, hooks, targets);
    reduces_armed = false;
    // What the hooks did not start (no backward here, or a parameter
    // without a gradient on this rank), in the same order.
    while (stages_started < stages.size()) start_stage_reduce(stages.size() - 1 - stages_started++);
    while (!reducing.empty()) finish_oldest_stage_reduce();
    device->finish_compute();
    ops::check_index_errors(compute->device());
  }
  drop_due = true;
  settle_downloads();
  // One sum: the parameters' flags, the loss, the tokens and (ZeRO-1) the
  // squares of this rank's shard.
  std::vector<double> sums(masters.size() + 3);
  for (size_t i = 0; i < masters.size(); ++i) sums[i] = has_grad[i] ? 1 : 0;
  sums[masters.size()] = st.loss;
  sums[masters.size() + 1] = static_cast<double>(st.tokens);
  if (options.zero) sums[masters.size() + 2] = options.zero->shard_squares();
  ranks.sum(sums);
  st.loss = sums[masters.size()];
  st.tokens = static_cast<int64_t>(sums[masters.size() + 1]);
  st.target_count = targets;
  st.compute_s = seconds_since(compute_start);

  const auto update_start = Clock::now();
  std::vector<Tensor> grads(masters.size());
  double squared = 0;
  if (options.zero) {
    std::vector<bool> has_gradient(masters.size());
    for (size_t i = 0; i < masters.size(); ++i) has_gradient[i] = sums[i] > 0;
    options.zero->take_reduced(has_gradient);
    squared = sums[masters.size() + 2];
  } else {
    for (size_t i = 0; i < masters.size(); ++i) {
      if (sums[i] == 0) continue;  // zeros from every rank: no gradient, as on one process
      grads[i] = slabs[0][i];
      squared += squares(grads[i]);
    }
  }
  st.grad_norm = std::sqrt(squared);
  if (!std::isfinite(st.loss) || !std::isfinite(st.grad_norm)) {
    st.skipped = true;
  } else if (st.target_count > 0) {
    const double scale = optim::clip_scale(st.grad_norm, o.max_grad_norm);
    // Nothing else is queued on the optimizer thread in this mode: the
    // update runs here, then the uploads.
    if (options.zero) {
      optimizer.update(o.lr, scale, 0, masters.size());
      optimizer.finish_step();
      options.zero->gather_masters();
    } else {
      for (size_t i = 0; i < masters.size(); ++i) masters[i].set_grad(grads[i]);
      optimizer.update(o.lr, scale, 0, masters.size());
      optimizer.finish_step();
      for (const Tensor& m : masters) m.set_grad(Tensor());
    }
    for (size_t s = 0; s < stages.size(); ++s)
      uploaded[s] = upload_weights(stages[s].first, stages[s].last, ready_ticket(), "weights");
    for (const Ticket& t : uploaded) wait_seconds(t);
  }
  st.optimizer_s = seconds_since(update_start);
  ++steps;
  record.finish();
  return st;
}

}  // namespace lt::exec
