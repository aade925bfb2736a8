// train.clip_with_previous_norm in the streaming executor: each stage's
// update queued as its gradients land, during the backward.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "exec/streaming_impl.h"

namespace lt::exec {

// Note [Updates during the backward]
// With exact global-norm clipping no stage can update before the whole
// backward has ended (the norm is needed first), so the updates, and the
// reads and write-backs of the states on disk, can hide only behind the next
// step's forward. With train.clip_with_previous_norm the clip factor is
// known when the step starts (clip_scale_before_backward: the previous
// step's norm's; a step without one, the first or one after a skipped step,
// runs the usual way), and:
// - Updates: copy_out(s) queues stage s's update right behind its gradient
//   download, in the backward's order (head, blocks L-1..0, embed); the
//   update task waits for the download's ticket, which also wrote the
//   stage's squared sum. Stage s's parameters are never bound to device
//   copies again in this step (its backward was its last use), so the
//   update cannot race a WeightBinding. The head's update leaves a tied
//   embedding alone: the embed stage owns it, and its gradient, the head's
//   part and the embedding's, is whole at the embed stage's copy_out. The
//   next step's forward of stage 0 comes first and waits for that update,
//   so every upload after it (the tied head's too) reads the new matrix.
//   finish_step() goes last, behind the embed stage's update.
// - Disk stages (Note [Stage states on disk]): the states thread runs, for
//   the disk stages in backward order e0 > e1 > ...,
//     R(e0) R(e1) W(e0) R(e2) W(e1) ... W(last),
//   R(ej) queued by copy_out(ej) and W(e[j-1]) right after it; U(ej) waits
//   for R(ej). A read cannot come earlier than the stage's backward: the
//   read points the parameters' TensorImpls at host memory, which a
//   binding of the same TensorImpls on the compute thread would undo. So
//   at most two disk stages' states are in host memory at once (one
//   written back, one read), within kStagesOfStatesInFlight, and their
//   traffic overlaps the rest of the backward as well as the next forward.
//   A write-back keeps its memory for the read behind it (Note [Recycled
//   state memory]) only when that read is of a block as it is (the same
//   tensor sizes, so the read takes all of it): nothing is left over.
// - A non-finite gradient: the update of a stage whose squared sum is not
//   finite is not made, nor any update after it in this step (they run in
//   backward order on one thread); a non-finite loss (known after the head
//   step, before any gradient lands) stops them all. The stages updated
//   before stay updated: the step's outcome is StepStats::skipped with
//   stages_updated_before_skip saying how many (the trainer logs it; it
//   counts as a bad step). The disk stages are written back either way.
// - Over ranks (options.ranks, ZeRO-1) this is refused: the stage's sums
//   over the ranks land later (streaming_ranks.cpp), not built yet.
struct StreamingExecutor::Impl::EarlyStep {
  double lr = 0, scale = 1;
  // A stage was not finite, so no later update: the optimizer thread's,
  // but set by the compute thread for a non-finite loss before it queues
  // the first update, and when the step fails (abandon_early_updates).
  std::atomic<bool> stopped{false};
  int64_t stages_updated = 0;
  // The compute thread's: the disk stages in backward order and how many
  // have been queued; per stage, whether copy_out queued its update.
  std::vector<size_t> disk_order;
  size_t disk_queued = 0;
  std::vector<char> queued;
};

bool StreamingExecutor::Impl::begin_early_updates(const StepOptions& step_options) {
  early.reset();
  const std::optional<double> scale = clip_scale_before_backward(step_options);
  if (step_options.clip_with_previous_norm)
    LT_CHECK(!options.ranks,
             "train.clip_with_previous_norm: the streaming executor updates during the backward "
             "in one process only, so far; set it to false for a run of several processes");
  if (!scale) return false;
  early = std::make_shared<EarlyStep>();
  early->lr = step_options.lr;
  early->scale = *scale;
  early->queued.assign(stages.size(), 0);
  early->disk_order.assign(disk_stages.rbegin(), disk_stages.rend());
  return true;
}

bool StreamingExecutor::Impl::early_update_goes(EarlyStep& step, size_t s) {
  if (step.stopped || !std::isfinite(stage_squares[s])) {
    step.stopped = true;
    return false;
  }
  ++step.stages_updated;
  return true;
}

void StreamingExecutor::Impl::queue_early_update(size_t s, const Ticket& gradients) {
  EarlyStep& step = *early;
  // The loss is whole once the head has run, before the first copy_out;
  // `stopped` is the optimizer thread's once an update is queued.
  if (std::none_of(step.queued.begin(), step.queued.end(), [](char q) { return q; }) &&
      !std::isfinite(stats->loss))
    step.stopped = true;
  step.queued[s] = 1;
  const bool on_disk = s < options.states_on_disk.size() && options.states_on_disk[s];
  if (!on_disk) {
    updated[s] = enqueue_update(s, step.lr, step.scale, {}, gradients, early);
    return;
  }
  const Ticket read = state_queue.enqueue([this, s, trace = tracing()] {
    TraceSpan span(trace, "disk", "read states " + model.stages()[s]->name());
    load_states(s);
  });
  state_updated[s] = enqueue_update(s, step.lr, step.scale, read, gradients, early);
  LT_CHECK(step.disk_queued < step.disk_order.size() && step.disk_order[step.disk_queued] == s,
           "streaming executor: stage '", model.stages()[s]->name(),
           "' copied its gradients out of the backward's order");
  if (++step.disk_queued >= 2) write_back_early(step.disk_queued - 2);
}

// W(e[j]) of Note [Updates during the backward].
void StreamingExecutor::Impl::write_back_early(size_t j) {
  const std::vector<size_t>& order = early->disk_order;
  const size_t s = order[j];
  // The read queued right behind this write-back, R(e[j+2]), takes its
  // memory when both are blocks (alike in their tensors' sizes).
  const auto block = [&](size_t stage) {
    return stage >= 1 && stage <= static_cast<size_t>(num_blocks);
  };
  const bool recycle = j + 2 < order.size() && block(s) && block(order[j + 2]);
  updated[s] =
      state_queue.enqueue([this, s, recycle, update = state_updated[s], trace = tracing()] {
        update.get();  // a failed update is already the executor's failure
        TraceSpan span(trace, "disk", "write states " + model.stages()[s]->name());
        try {
          evict_states(s, recycle);
        } catch (...) {
          update_failed("writing back the states of stage '" + model.stages()[s]->name() + "'");
        }
      });
}

void StreamingExecutor::Impl::end_early_updates(StepStats& st) {
  EarlyStep& step = *early;
  for (size_t s = 0; s < stages.size(); ++s)
    LT_CHECK(step.queued[s], "streaming executor: stage '", model.stages()[s]->name(),
             "' copied no gradients out in a step that updates during the backward");
  if (step.disk_queued > 0) write_back_early(step.disk_queued - 1);
  step_finished = optimizer_queue.enqueue([this, early = early] {
    try {
      if (early->stages_updated > 0) optimizer.finish_step();
    } catch (...) {
      update_failed("the optimizer's end of step");
    }
  });
  // The outcome the updates reach on their thread, from the same sums: in
  // backward order, stages update until the first non-finite one.
  st.skipped = !std::isfinite(st.loss) || !std::isfinite(st.grad_norm);
  if (st.skipped && std::isfinite(st.loss)) {
    for (size_t s = stages.size(); s-- > 0 && std::isfinite(stage_squares[s]);)
      ++st.stages_updated_before_skip;
  }
  early.reset();
}

// The step failed (its backward threw): the updates still queued do
// nothing (`stopped`), the disk stages read so far are written back as
// they are, and the memory kept for reads that will not come is dropped
// behind them. An update already running completes; the step's own error
// stops the run.
void StreamingExecutor::Impl::abandon_early_updates() noexcept {
  if (!early) return;
  early->stopped = true;
  try {
    if (early->disk_queued > 0) write_back_early(early->disk_queued - 1);
    if (disk_states) state_queue.enqueue([this] { disk_states->drop_spare(); });
  } catch (...) {  // the step's own error is the one reported
  }
  early.reset();
}

}  // namespace lt::exec
