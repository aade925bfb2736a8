// Data parallel for the synchronous offload executor (docs/distributed.md),
// with or without ZeRO-1 (exec/zero_optimizer.h). One step, every rank:
//
//  1. the global batch's target count summed over the ranks, the loss's
//     denominator (as the resident executor does);
//  2. forward and backward on this rank's shard on the device weights;
//  3. which parameters have a gradient (on any rank), the loss and token
//     counts summed; a parameter with a gradient elsewhere but not here
//     gets zeros;
//  4. the gradients reduced over the ranks *on the device*, before the
//     download (CrossRankSum: NCCL on GPUs, MPI on the CPU, where the
//     stand-in device's memory is host memory: the CPU tests run the code a
//     GPU rank runs): all-reduced and downloaded whole (each rank updates
//     every master with the same sums), or with ZeRO-1 laid into one
//     device buffer in the flat layout and reduce-scattered, each rank
//     downloading only its shard (widened to f32 on the host) and updating
//     it, then the new masters all-gathered (and the device's bf16 copies
//     refreshed);
//  5. the gradient norm taken of the sums, so clipping and the skip of a
//     non-finite step agree on every rank;
//  6. the new weights uploaded from the masters.
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

double OffloadExecutor::Impl::reduce_gradients_over_ranks(const std::vector<double>& has) {
  CrossRankSum& ranks = *options.ranks;
  std::vector<Tensor> grads;  // on the device: those with a gradient on some rank
  for (size_t i = 0; i < weights.size(); ++i) {
    if (has[i] == 0) continue;
    if (!weights[i].grad().defined()) {  // this rank adds zeros
      Tensor zeros = device->empty(weights[i].shape(), device->compute_dtype());
      zeros.zero_();
      weights[i].set_grad(zeros);
    }
    grads.push_back(weights[i].grad().contiguous());
  }
  if (!options.zero) {
    ranks.sum(grads);
    return 0;
  }
  // ZeRO-1: the flat layout on the device (zeros where no parameter has a
  // gradient, and in the padding), reduce-scattered.
  ZeroOptimizer& zero = *options.zero;
  const ZeroShards& shards = zero.shards();
  Tensor flat = device->empty({shards.flat_size}, device->compute_dtype());
  flat.zero_();
  for (size_t i = 0, k = 0; i < weights.size(); ++i) {
    if (has[i] == 0) continue;
    const Tensor& g = grads[k++];
    flat.slice(0, shards.param_offsets[i], shards.param_offsets[i] + g.numel())
        .view(g.shape())
        .copy_(g);
  }
  grads.clear();
  for (const Tensor& w : weights) w.set_grad(Tensor());
  Tensor shard = device->empty({shards.shard}, device->compute_dtype());
  ranks.reduce_scatter(flat, shard);
  const Tensor host = zero.shard_gradient(0);  // one group: the whole shard
  if (shard.dtype() == host.dtype()) {
    wait_seconds(device->download({{host, shard}}, {}, "grad shard"));
  } else {  // bf16 on a GPU: lands in pinned memory, widened on the host
    Tensor landing = Tensor::empty({shards.shard}, shard.dtype(), device->host_memory());
    wait_seconds(device->download({{landing, shard}}, {}, "grad shard"));
    host.copy_(landing);
  }
  stats->d2h_bytes += static_cast<int64_t>(shard.nbytes());
  std::vector<bool> has_gradient(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) has_gradient[i] = has[i] > 0;
  zero.take_reduced(has_gradient);
  return zero.shard_squares();
}

StepStats OffloadExecutor::Impl::run_step_over_ranks(const std::vector<data::Batch>& micro_batches,
                                                     const StepOptions& o) {
  CrossRankSum& ranks = *options.ranks;
  LT_CHECK(!options.zenflow,
           "exec.mode zenflow: a run of several processes cannot use ZenFlow yet; use exec.mode "
           "offload (or resident)");
  if (options.zero) {
    // The host receives only the shard (ZeroOptimizer::shard_gradient), so
    // the executor's own slabs go: nothing reads them under ZeRO-1.
    for (Tensor& slab : slabs[0]) slab = Tensor();
  }
  StepStats st;
  StepRecord record(*this, st);
  wait_uploads();

  const auto compute_start = Clock::now();
  double targets = 0;
  for (const auto& mb : micro_batches) targets += static_cast<double>(mb.target_count);
  ranks.sum(std::span<double>(&targets, 1));
  std::vector<double> has(masters.size() + 2);
  double squared = 0;
  {
    auto scope = device->compute_scope();
    forward_backward(*compute, micro_batches, nullptr, st, {}, static_cast<int64_t>(targets));
    // Which parameters have a gradient on some rank (the same list on
    // all), the loss and the tokens, in one sum.
    for (size_t i = 0; i < masters.size(); ++i) has[i] = weights[i].grad().defined() ? 1 : 0;
    has[masters.size()] = st.loss;
    has[masters.size() + 1] = static_cast<double>(st.tokens);
    ranks.sum(has);
    squared = reduce_gradients_over_ranks(has);
    device->finish_compute();
    ops::check_index_errors(compute->device());
  }
  st.loss = has[masters.size()];
  st.tokens = static_cast<int64_t>(has[masters.size() + 1]);
  st.target_count = static_cast<int64_t>(targets);
  st.compute_s = seconds_since(compute_start);

  std::vector<Tensor> grads(masters.size());
  if (!options.zero) {
    for (const StageRange& r : stages)
      pending_downloads.push_back(download_gradients(r.first, r.last, 0, "grads"));
    drop_due = true;
    settle_downloads();
    for (size_t i = 0; i < masters.size(); ++i) {
      if (!slab_filled[0][i]) continue;
      grads[i] = slabs[0][i];
      squared += squares(grads[i]);
    }
  }

  const auto update_start = Clock::now();
  if (options.zero) ranks.sum(std::span<double>(&squared, 1));  // the shards' squares
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
