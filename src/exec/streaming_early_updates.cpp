// train.clip_with_previous_norm in the streaming executor: each stage's
// update queued as its gradients land, during the backward.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "exec/memory_budget.h"
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
// - Disk stages (Note [Stage states on disk]), e0 > e1 > ... > e[n-1] in
//   backward order, k = kStagesOfStatesInFlight (3): a read R(ej) fills
//   memory the stage's tensors do not point at (read_ahead), so it may run
//   while the compute thread still binds the stage's parameters to device
//   copies; the stage's update attaches it (points every handle at it) in
//   its wait for its states, after its gradients' download, that is after
//   the stage's backward, when no binding of them is left in the step. So
//   the reads need not wait for their stage's backward:
//   - step start (read_states_before_backward): R(e0) .. R(e[k-1]) queued;
//   - copy_out(ej): U(ej) (optimizer thread: waits for the gradients and
//     R(ej), attaches, updates), then on the states thread W(ej) (waits for
//     U(ej), writes back, frees) and R(e[j+k]) behind it.
//   The states thread's FIFO is R(e0) R(e1) R(e2) W(e0) R(e3) W(e1) R(e4)
//   ... W(e[n-1]); each read after the first k waits in the FIFO for the
//   write-back k disk stages before it, so at most k stages' masters and
//   states are in host memory at once, read ahead or attached (what
//   memory_budget.h counts), and each wait points at an earlier task (W ->
//   U -> R; R(e[j+k]) after W(ej)), so nothing waits in a cycle. The step's
//   first reads run behind the previous step's write-backs, which the
//   forward waits for stage by stage: once the forward has passed the disk
//   stages (or, on a slow disk, the last of them has been written), R(e0)
//   .. R(e2) run through the rest of the forward and the head's step, and
//   then the disk has work through the backward: W(ej) as soon as U(ej),
//   and the next read behind it. The last write-back trails into the next
//   forward only by what the disk cannot do during the backward, which the
//   planner prices (plan::predict_update_pipeline_during_backward).
//   A write-back keeps its memory for the read behind it (Note [Recycled
//   state memory]) only when that read is of a block as it is (the same
//   tensor sizes, so the read takes all of it): nothing is left over.
// - Exact clipping (no clip factor before the backward) reads too: the
//   updates run in forward order after the backward (enqueue_updates_on_
//   disk), and the first kStateReadAhead disk stages in forward order,
//   which are also the last in backward order, are read at the step's
//   start, so their reads are done when the updates begin: R(d0) R(d1)
//   [backward] U(d0) U(d1) W(d0) R(d2) ..., the FIFO (and host memory) as
//   without it. A skipped step (not finite) takes no read: the next step,
//   or sync(), drops them first.
// - A step that fails mid-backward (abandon_early_updates) drops the reads
//   that no queued update will attach (and the recycled memory kept for
//   them) behind the write-backs already queued.
// - A non-finite gradient: the update of a stage whose squared sum is not
//   finite is not made, nor any update after it in this step (they run in
//   backward order on one thread); a non-finite loss (known after the head
//   step, before any gradient lands) stops them all. The stages updated
//   before stay updated: the step's outcome is StepStats::skipped with
//   stages_updated_before_skip saying how many (the trainer logs it; it
//   counts as a bad step). The disk stages are written back either way.
// - A stage on the device (Note [Stages on the device]) takes its place in
//   the same order: the optimizer thread queues its update on the compute
//   stream, behind the stage's backward (enqueue_update_on_device); the
//   optimizer is still called from that one thread.
// - Over ranks (options.ranks, ZeRO-1) this is refused: the stage's sums
//   over the ranks land later (streaming_ranks.cpp), not built yet.
namespace {

// k of the Note: reads run this many disk stages ahead of the write-backs.
constexpr size_t kReadsAhead = kStagesOfStatesInFlight;

}  // namespace

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
  read_states_before_backward(scale.has_value());
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
  update_pieces[s].clear();  // this update is queued whole
  if (on_device[s]) {
    updated[s] = enqueue_update_on_device(s, early);
    return;
  }
  const bool on_disk = s < options.states_on_disk.size() && options.states_on_disk[s];
  if (!on_disk) {
    updated[s] = enqueue_update(s, step.lr, step.scale, {}, gradients, early);
    return;
  }
  // Checked before the update is queued: a failure after it would leave an
  // attached stage without its write-back.
  LT_CHECK(step.disk_queued < step.disk_order.size() && step.disk_order[step.disk_queued] == s,
           "streaming executor: stage '", model.stages()[s]->name(),
           "' copied its gradients out of the backward's order");
  state_updated[s] = enqueue_update(s, step.lr, step.scale, attach_in_update(s), gradients, early);
  write_back_early(step.disk_queued);
  const size_t next_read = step.disk_queued + kReadsAhead;
  if (next_read < step.disk_order.size()) read_states_ahead(step.disk_order[next_read]);
  ++step.disk_queued;
}

// A stage on the device, in the backward's order with the others: the
// optimizer thread queues its update on the compute stream (its scope), so
// that stream order puts it after the stage's backward, queued before this,
// and before the stage's next forward, which the compute thread queues
// only once this ticket is done. Its gradients stay the task's until it
// ends: freed behind the update on the same stream, whichever thread drops
// them.
Ticket StreamingExecutor::Impl::enqueue_update_on_device(size_t s,
                                                         std::shared_ptr<EarlyStep> step) {
  const StageInfo& info = stages[s];
  std::vector<Tensor> grads;
  for (size_t i = info.first; i < info.last; ++i) grads.push_back(std::move(device_params[i].grad));
  return optimizer_queue.enqueue(
      [this, s, step = std::move(step), grads = std::move(grads), trace = tracing()] {
        const StageInfo& stage = stages[s];
        const auto drop = [&] {
          for (size_t i = stage.first; i < stage.last; ++i) params[i].set_grad(Tensor());
        };
        if (!early_update_goes(*step, s)) return;
        const std::string& name = model.stages()[s]->name();
        TraceSpan span(trace, "optimizer", "update " + name + " (on the device)");
        try {
          auto scope = device.compute_scope();
          for (size_t i = stage.first; i < stage.last; ++i)
            if (grads[i - stage.first].defined()) params[i].set_grad(grads[i - stage.first]);
          optimizer.update(step->lr, step->scale, stage.first, stage.last);
        } catch (...) {
          drop();
          update_failed("the optimizer update of stage '" + name + "' on the device");
        }
        drop();
      });
}

// W(e[j]) of Note [Updates during the backward].
void StreamingExecutor::Impl::write_back_early(size_t j) {
  const std::vector<size_t>& order = early->disk_order;
  const size_t s = order[j];
  // The read queued right behind this write-back, R(e[j+k]), takes its
  // memory when both are blocks (alike in their tensors' sizes).
  const auto block = [&](size_t stage) {
    return stage >= 1 && stage <= static_cast<size_t>(num_blocks);
  };
  const size_t behind = j + kReadsAhead;
  const bool recycle = behind < order.size() && block(s) && block(order[behind]);
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
// nothing (`stopped`) but attach their reads, the write-backs queued with
// them put those disk stages back on disk as they are, and behind them the
// reads no update will attach, and the memory kept for them, are dropped.
// An update already running completes; the step's own error stops the run.
void StreamingExecutor::Impl::abandon_early_updates() noexcept {
  if (early) early->stopped = true;
  try {
    if (disk_states) drop_states_read_ahead();  // exact clipping's reads too
  } catch (...) {
    // The step's own error is the one reported.
  }
  early.reset();
}

}  // namespace lt::exec
