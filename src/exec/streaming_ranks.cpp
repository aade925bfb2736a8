// Data parallel for the streaming executor (docs/distributed.md): every
// rank streams the model through its shard of the global batch, the loss
// divided by the global target count; each stage's gradients, once its
// download to the host slabs has landed, are summed over the ranks
// (CrossRankSum::start_sum), started from the compute thread as later
// stages' backwards end, so the sums overlap the rest of the backward; the
// gradient norm is taken of the sums, so clipping and the updates (queued
// as on one process) are the same on every rank.
//
// Every rank starts the same sums in the same order: stages in backward
// order, every parameter of a stage (one that has no gradient on this rank
// adds zeros; whether it has one is summed at the end, so a parameter with
// a gradient on no rank is skipped by the optimizer as on one process).
// The collectives run in host memory (MPI on the CPU); GPUs would sum the
// pinned bf16 slabs, not built: refused.
#include <chrono>

#include "exec/streaming_impl.h"

namespace lt::exec {

namespace {

bool landed(const Ticket& t) {
  return !t.valid() || t.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

int64_t StreamingExecutor::Impl::begin_sums_over_ranks(int64_t local_targets) {
  LT_CHECK(device.memory().device().is_cpu() && device.compute_dtype() == DType::F32,
           "exec.mode streaming with several ranks runs on the CPU (f32) only, so far: its "
           "gradients are summed in host memory over MPI");
  sums_due.clear();
  sum_started.assign(stages.size(), 0);
  double targets = static_cast<double>(local_targets);
  options.ranks->sum(std::span<double>(&targets, 1));
  return static_cast<int64_t>(targets);
}

void StreamingExecutor::Impl::start_landed_sums() {
  while (!sums_due.empty() && landed(sums_due.front().downloaded)) {
    const int stage = sums_due.front().stage;
    wait_seconds(sums_due.front().downloaded);  // rethrows a failed copy
    sums_due.pop_front();
    const StageInfo& info = stages[static_cast<size_t>(stage)];
    std::vector<Tensor> grads;
    for (size_t i = info.first; i < info.last; ++i) {
      // The stage's update of the last step, which read the slab, ended
      // before this step's forward of the stage began.
      if (!has_grad[i]) grad_slabs[i].zero_();
      grads.push_back(grad_slabs[i]);
    }
    options.ranks->start_sum(grads);
    sum_started[static_cast<size_t>(stage)] = 1;
  }
}

double StreamingExecutor::Impl::finish_sums_over_ranks(StepStats& st) {
  for (StageDownload& d : sums_due) wait_seconds(d.downloaded);
  start_landed_sums();
  // Stages this rank never copied out (no targets in its shard): zeros, in
  // backward order as the others copy them out.
  for (size_t s = stages.size(); s-- > 0;) {
    if (sum_started[s]) continue;
    // No forward of the stage waited for its last update, which reads the
    // slabs about to be zeroed.
    stats->optimizer_s += wait_seconds(updated[s]);
    for (size_t i = stages[s].first; i < stages[s].last; ++i) has_grad[i] = false;
    sums_due.push_back({static_cast<int>(s), Ticket()});
    start_landed_sums();
  }
  options.ranks->wait_for_sums();
  std::vector<double> sums(params.size() + 2);
  for (size_t i = 0; i < params.size(); ++i) sums[i] = has_grad[i] ? 1 : 0;
  sums[params.size()] = st.loss;
  sums[params.size() + 1] = static_cast<double>(st.tokens);
  options.ranks->sum(sums);
  st.loss = sums[params.size()];
  st.tokens = static_cast<int64_t>(sums[params.size() + 1]);
  double squared = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    has_grad[i] = sums[i] > 0;
    if (!has_grad[i]) continue;
    const float* g = grad_slabs[i].data<float>();
    for (int64_t k = 0; k < grad_slabs[i].numel(); ++k) squared += double(g[k]) * double(g[k]);
  }
  return squared;
}

}  // namespace lt::exec
