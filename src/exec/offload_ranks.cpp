// Data parallel for the synchronous offload executor (docs/distributed.md),
// with or without ZeRO-1 (exec/zero_optimizer.h). One step, every rank:
//
//  1. the global batch's target count summed over the ranks, the loss's
//     denominator (as the resident executor does);
//  2. forward and backward on this rank's shard on the device weights;
//  3. the loss and token counts summed; every gradient copied to the host
//     slabs;
//  4. the gradients summed: all-reduced (each rank updates every master
//     with the same sum), or with ZeRO-1 reduce-scattered (each rank
//     updates its shard) and the new masters all-gathered;
//  5. the gradient norm taken of the sum on the host, so clipping and the
//     skip of a non-finite step agree on every rank;
//  6. the new weights uploaded from the masters.
//
// The collectives run in host memory (MPI on the CPU). On GPUs they would
// be MPI over pinned host buffers, or NCCL on the device before the
// download: not built, refused.
#include <chrono>
#include <cmath>

#include "exec/offload_impl.h"
#include "exec/zero_optimizer.h"
#include "ops/index_checks.h"
#include "optim/clip.h"

namespace lt::exec {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double squares(const Tensor& t) {
  double s = 0;
  const float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) s += double(d[i]) * double(d[i]);
  return s;
}

}  // namespace

double OffloadExecutor::Impl::sum_gradients_over_ranks(std::vector<Tensor>& grads) {
  // Which parameters have a gradient on some rank: the same list on all.
  std::vector<double> has(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) has[i] = grads[i].defined() ? 1 : 0;
  options.ranks->sum(has);
  std::vector<Tensor> summed;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (has[i] == 0) continue;
    if (!grads[i].defined()) {
      slabs[0][i].zero_();  // this rank adds zeros
      grads[i] = slabs[0][i];
    }
    summed.push_back(grads[i]);
  }
  options.ranks->sum(summed);
  double squared = 0;
  for (const Tensor& g : summed) squared += squares(g);
  return squared;
}

StepStats OffloadExecutor::Impl::run_step_over_ranks(const std::vector<data::Batch>& micro_batches,
                                                     const StepOptions& o) {
  CrossRankSum& ranks = *options.ranks;
  LT_CHECK(!options.zenflow,
           "exec.mode zenflow: a run of several processes cannot use ZenFlow yet; use exec.mode "
           "offload (or resident)");
  LT_CHECK(device->memory().device().is_cpu() && device->compute_dtype() == DType::F32,
           "exec.mode offload with several ranks runs on the CPU (f32) only, so far: its "
           "gradients are summed in host memory over MPI");
  if (options.zero && !masters.empty() &&
      slabs[0][0].data_ptr() != options.zero->flat_gradient_view(0).data_ptr()) {
    // Once: the gradients download straight into ZeRO-1's flat buffer, and
    // the executor's own slabs go (4 bytes a parameter less on the host).
    for (size_t i = 0; i < masters.size(); ++i) slabs[0][i] = options.zero->flat_gradient_view(i);
  }
  StepStats st;
  StepRecord record(*this, st);
  wait_uploads();

  const auto compute_start = Clock::now();
  double targets = 0;
  for (const auto& mb : micro_batches) targets += static_cast<double>(mb.target_count);
  ranks.sum(std::span<double>(&targets, 1));
  {
    auto scope = device->compute_scope();
    forward_backward(*compute, micro_batches, nullptr, st, {}, static_cast<int64_t>(targets));
    device->finish_compute();
    ops::check_index_errors(compute->device());
  }
  double totals[2] = {st.loss, static_cast<double>(st.tokens)};
  ranks.sum(totals);
  st.loss = totals[0];
  st.tokens = static_cast<int64_t>(totals[1]);
  st.target_count = static_cast<int64_t>(targets);
  st.compute_s = seconds_since(compute_start);

  for (const StageRange& r : stages)
    pending_downloads.push_back(download_gradients(r.first, r.last, 0, "grads"));
  drop_due = true;
  settle_downloads();
  std::vector<Tensor> grads(masters.size());
  for (size_t i = 0; i < masters.size(); ++i)
    if (slab_filled[0][i]) grads[i] = slabs[0][i];

  const auto update_start = Clock::now();
  const double squared =
      options.zero ? options.zero->reduce_gradients(grads) : sum_gradients_over_ranks(grads);
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
