// Data parallel for the streaming executor (docs/distributed.md): every
// rank streams the model through its shard of the global batch, the loss
// divided by the global target count. As each stage's backward ends, its
// gradients are reduced over the ranks *on the device*, before they are
// copied to the host (CrossRankSum: NCCL on GPUs, MPI on the CPU, where
// the stand-in device's memory is host memory: the CPU tests run the same
// code as a GPU rank):
//
//  - all-reduce: every rank downloads the summed gradients of the stage
//    into its host slabs; the download adds their squares, as on one
//    process, so the norm, clipping and the updates (queued as on one
//    process) are the same on every rank;
//  - ZeRO-1 (options.zero, exec/zero_optimizer.h, one group per stage):
//    the stage's gradients are laid into a device buffer in the group's
//    flat layout and reduce-scattered; each rank downloads only its shard
//    (in the compute dtype; converted to the f32 shard on the host), the
//    norm is the sum of the ranks' shards' squares, each rank updates its
//    shard, and as each stage's update ends its shard of the masters is
//    all-gathered into every rank's (and the device's bf16 copies
//    refreshed) before the next upload of that stage (Note [Overlapped
//    all-gathers]), so that the updates overlap the next forward.
//    With the weights shared by the ranks of the host (Note [Weights
//    shared by the ranks of a host]) there is nothing to gather: each
//    stage's update is done once every rank of the host has written its
//    pieces, and the next forward waits for that stage alone, as in one
//    process.
//
// Every rank runs the same collectives in the same order: stages in
// backward order, every parameter of a stage (one that has no gradient on
// this rank adds zeros; whether it has one is summed at the end, so a
// parameter with a gradient on no rank is skipped by the optimizer as on
// one process), also a rank whose shard has no targets, which runs no
// backward and reduces zeros. Each stage's reduce runs behind the next
// stage's backward (Note [Reduces behind the backward]).
#include <chrono>

#include "exec/streaming_impl.h"
#include "exec/zero_optimizer.h"
#include "optim/clip.h"

namespace lt::exec {

std::vector<size_t> streaming_zero_groups(const models::CausalLM& model) {
  std::vector<size_t> firsts;
  size_t next = 0;
  for (const auto& stage : model.stages()) {
    nn::NamedParameters own;
    stage->collect(own);
    if (!own.empty()) firsts.push_back(next);
    next += own.size();
  }
  return firsts;
}

int64_t StreamingExecutor::Impl::begin_sums_over_ranks(int64_t local_targets) {
  if (options.zero) {
    LT_CHECK(!disk_states, "dist.zero 1 with exec.state_placement disk is not supported yet: ",
             "keep the states in host memory, or set dist.zero 0");
    // The host receives only the shards (ZeroOptimizer::shard_gradient),
    // so the executor's own slabs go: 4 bytes a parameter less.
    for (Tensor& slab : grad_slabs) slab = Tensor();
  }
  copied_out.assign(stages.size(), 0);
  reducing.clear();  // none left but by a failed step
  double targets = static_cast<double>(local_targets);
  options.ranks->sum(std::span<double>(&targets, 1));
  return static_cast<int64_t>(targets);
}

// Note [Reduces behind the backward]
// A stage's reduce is started as its backward ends (start_sum,
// start_reduce_scatter: NCCL queues it on its communication stream; MPI
// starts a non-blocking collective) and finished, its sums downloaded,
// once the next stage's backward has ended and that stage's reduce has
// started: so each reduce runs while the compute thread queues and runs
// the next stage's backward, and the collectives still start in backward
// order on every rank. The last one is finished after the backward
// (finish_sums_over_ranks). The stage's device gradients (and under
// ZeRO-1 its flat buffer and shard) live until then: one stage's more
// than when the reduce blocked. Every all-gather of the step has been
// waited for before the first reduce starts (Note [Overlapped
// all-gathers]; the forward's loads did), so the oldest collective in
// flight is always the oldest reduce.
void StreamingExecutor::Impl::copy_out_over_ranks(int stage) {
  const StageInfo& info = stages[static_cast<size_t>(stage)];
  copied_out[static_cast<size_t>(stage)] = 1;
  stage_squares[static_cast<size_t>(stage)] = 0;
  std::vector<Tensor> grads;  // on the device, one per parameter the stage owns
  for (size_t i = info.first; i < info.last; ++i) {
    Tensor g = params[i].grad();
    has_grad[i] = g.defined();
    params[i].set_grad(Tensor());
    if (!g.defined()) {
      g = device.empty(params[i].shape(), device.compute_dtype());
      g.zero_();
    }
    grads.push_back(g.contiguous());
  }
  if (grads.empty()) return;
  gather_through(stages.size() - 1);  // done already by the forward's loads
  StartedReduce started;
  started.stage = stage;
  if (!options.zero) {
    options.ranks->start_sum(grads);
    started.grads = std::move(grads);
  } else {
    ZeroOptimizer& zero = *options.zero;
    const ZeroGroup& g = zero.shards().groups[zero.group_of(info.first)];
    Tensor flat = device.empty({zero.shards().world * g.shard}, device.compute_dtype());
    flat.zero_();  // the padding adds zeros
    for (size_t i = info.first; i < info.last; ++i) {
      const int64_t at = zero.shards().param_offsets[i] - g.flat;
      const Tensor& grad = grads[i - info.first];
      flat.slice(0, at, at + grad.numel()).view(grad.shape()).copy_(grad);
    }
    grads.clear();
    started.shard = device.empty({g.shard}, device.compute_dtype());
    options.ranks->start_reduce_scatter(flat, started.shard);  // holds `flat` until the wait
  }
  reducing.push_back(std::move(started));
  while (reducing.size() > 1) finish_oldest_reduce();
}

void StreamingExecutor::Impl::finish_oldest_reduce() {
  const StartedReduce r = std::move(reducing.front());
  reducing.pop_front();
  options.ranks->wait_for_oldest_sums(1);
  const StageInfo& info = stages[static_cast<size_t>(r.stage)];
  const std::string label = model.stages()[static_cast<size_t>(r.stage)]->name();
  if (!options.zero) {
    CopyList copies;
    nn::NamedParameters views;
    for (size_t i = info.first; i < info.last; ++i) {
      norm_views[i].set_grad(grad_slabs[i]);
      copies.emplace_back(grad_slabs[i], r.grads[i - info.first]);
      views.emplace_back(names[i], norm_views[i]);
    }
    double* square = &stage_squares[static_cast<size_t>(r.stage)];
    downloads.push_back(download(
        std::move(copies),
        [square, views = std::move(views)] { *square = optim::grad_squared_sum(views); },
        "grads " + label));
    return;
  }
  const Tensor host = options.zero->shard_gradient(options.zero->group_of(info.first));  // f32
  if (r.shard.dtype() == host.dtype()) {
    downloads.push_back(download({{host, r.shard}}, {}, "grad shard " + label));
    return;
  }
  // bf16 on a GPU: lands in pinned memory, widened on the host.
  Tensor landing = Tensor::empty(r.shard.shape(), r.shard.dtype(), device.host_memory());
  downloads.push_back(download(
      {{landing, r.shard}}, [host, landing] { host.copy_(landing); }, "grad shard " + label));
}

double StreamingExecutor::Impl::finish_sums_over_ranks(StepStats& st) {
  // A rank that loaded nothing this step gathers now, before its first
  // reduce-scatter, as the others did in their forward.
  if (!stages.empty()) gather_through(stages.size() - 1);
  // Stages this rank never copied out (no targets in its shard): zeros, in
  // backward order as the others copy them out.
  bool all_copied = true;
  for (char c : copied_out) all_copied = all_copied && c;
  if (!all_copied) {
    auto scope = device.compute_scope();
    for (size_t s = stages.size(); s-- > 0;) {
      if (copied_out[s]) continue;
      // No forward of the stage waited for its last update, which reads
      // the slabs about to be written.
      stats->optimizer_s += wait_seconds(updated[s]);
      copy_out_over_ranks(static_cast<int>(s));
    }
  }
  while (!reducing.empty()) finish_oldest_reduce();
  for (const Ticket& t : downloads) st.exposed_d2h_s += wait_seconds(t);
  downloads.clear();
  last_download = download_before_last = Ticket();
  // One sum: the parameters' flags, the loss, the tokens and (ZeRO-1) the
  // squares of this rank's shard.
  std::vector<double> sums(params.size() + 3);
  for (size_t i = 0; i < params.size(); ++i) sums[i] = has_grad[i] ? 1 : 0;
  sums[params.size()] = st.loss;
  sums[params.size() + 1] = static_cast<double>(st.tokens);
  if (options.zero) sums[params.size() + 2] = options.zero->shard_squares();
  options.ranks->sum(sums);
  st.loss = sums[params.size()];
  st.tokens = static_cast<int64_t>(sums[params.size() + 1]);
  for (size_t i = 0; i < params.size(); ++i) has_grad[i] = sums[i] > 0;
  if (options.zero) {
    options.zero->take_reduced(has_grad);
    return sums[params.size() + 2];
  }
  double squared = 0;  // in the chain's order, as one process adds them
  for (double s : stage_squares) squared += s;
  return squared;
}

// Note [Overlapped all-gathers]
// Without shared weights each rank's masters need the other ranks' shards
// after every update: stage s's all-gather. step() returns without it, so
// that the updates run behind the next forward as on one process, and
// the next upload of stage s (load()) first calls gather_through(s): the
// gathers of stages 0..s start in stage order, each once its own update
// has ended, and stage s's is waited for (MPI: polled, bounded by
// dist.timeout_s) and copied into the masters, the later stages' gathers
// staying in flight or not yet started. Every rank starts the same
// collectives in the same order: after the step's target sum, the
// gathers in stage order before any of the step's reduce-scatters (every
// forward loads every stage before the backward starts; a rank without
// targets, which loads nothing, gathers all at the start of its sums);
// sync() and the destructor finish what is left, so that a checkpoint or
// an evaluation reads whole masters.
void StreamingExecutor::Impl::defer_gathers() {
  gathers_due = true;
  gathers_started = gathers_finished = 0;
}

void StreamingExecutor::Impl::gather_through(size_t stage) {
  if (!gathers_due) return;
  const auto start = std::chrono::steady_clock::now();
  ZeroOptimizer& zero = *options.zero;
  for (; gathers_started <= stage && gathers_started < stages.size(); ++gathers_started) {
    const StageInfo& info = stages[gathers_started];
    wait_seconds(updated[gathers_started]);
    if (info.first < info.last) zero.start_gather(zero.group_of(info.first));
  }
  for (; gathers_finished < gathers_started && gathers_finished <= stage; ++gathers_finished) {
    if (stages[gathers_finished].first == stages[gathers_finished].last) continue;
    options.ranks->wait_for_oldest_sums(1);
    zero.finish_oldest_gather();
  }
  if (gathers_finished == stages.size()) gathers_due = false;
  if (stats)
    stats->optimizer_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace lt::exec
