#include "exec/streaming.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <future>
#include <numeric>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "exec/forward_backward.h"
#include "exec/streaming_impl.h"
#include "exec/weight_binding.h"
#include "exec/zero_optimizer.h"
#include "optim/clip.h"

namespace lt::exec {

namespace {

using Clock = std::chrono::steady_clock;

// Splits each micro-batch into pieces of at most `rows` sequences (0: keep
// it whole); pieces without a counted target add nothing and are left out,
// as the resident executor leaves out such micro-batches.
std::vector<data::Batch> split_rows(const std::vector<data::Batch>& micro_batches, int64_t rows) {
  std::vector<data::Batch> out;
  for (const auto& mb : micro_batches) {
    if (mb.target_count == 0) continue;
    const int64_t n = mb.ids.size(0);
    if (rows <= 0 || rows >= n) {
      out.push_back(mb);
      continue;
    }
    for (int64_t r = 0; r < n; r += rows) {
      data::Batch piece;
      piece.ids = mb.ids.slice(0, r, std::min(n, r + rows)).contiguous();
      piece.targets = mb.targets.slice(0, r, std::min(n, r + rows)).contiguous();
      piece.target_count = models::count_targets(piece.targets);
      if (piece.target_count > 0) out.push_back(std::move(piece));
    }
  }
  return out;
}

// Runs `what`; an error is written to stderr instead of thrown (for
// teardown, which must not throw).
template <typename Fn>
void or_report(const char* what, Fn&& fn) noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lazytrain: streaming executor: %s: %s\n", what, e.what());
  } catch (...) {
    std::fprintf(stderr, "lazytrain: streaming executor: %s failed\n", what);
  }
}

}  // namespace

StreamingExecutor::Impl::Impl(const models::CausalLM& m, optim::Optimizer& o, StreamingDevice& d,
                              StreamingOptions opts)
    : model(m),
      optimizer(o),
      device(d),
      options(std::move(opts)),
      num_blocks(static_cast<int>(m.config().num_hidden_layers)),
      plan(plan_stage(options.schedule, num_blocks)) {
  for (Placement p : options.schedule.boundaries) {
    if (p == Placement::Disk && !disk) disk = std::make_unique<DiskSpill>(options.disk);
  }
  LT_CHECK(options.schedule.executor == ExecutorKind::Streaming, "exec.schedule: executor is \"",
           executor_name(options.schedule.executor), "\", but this is the streaming executor");
  // Note [The fused tail]: not wired into the ranks' reduces and gathers,
  // nor into the disk stages' read-ahead.
  LT_CHECK(
      options.schedule.tail_blocks == 0 ||
          (!options.ranks && std::none_of(options.states_on_disk.begin(),
                                          options.states_on_disk.end(), [](bool d) { return d; })),
      "exec.schedule: fused_tail is not supported with several ranks or with stage states on "
      "disk");
  for (auto& [name, p] : model.parameters()) {
    // A master without memory (its disk stage's values come from
    // options.fill_masters) is a host tensor once it has it.
    const bool has_memory = p.storage() != nullptr;
    LT_CHECK((!has_memory || p.device().is_cpu()) && p.dtype() == DType::F32 && p.is_contiguous(),
             "streaming executor: master parameter '", name,
             "' must be a contiguous f32 CPU tensor, got ", has_memory ? p.str() : "no memory");
    names.push_back(name);
    params.push_back(p);
    auto alias = [&] {
      return has_memory
                 ? Tensor::from_storage(p.storage(), p.offset(), p.shape(), p.strides(), p.dtype())
                 : optim::tensor_without_memory(p.shape(), p.dtype());
    };
    masters.push_back(alias());
    norm_views.push_back(alias());
  }
  has_grad.assign(params.size(), false);
  LT_CHECK(optimizer.size() == params.size(), "streaming executor: the optimizer holds ",
           optimizer.size(), " parameters, the model ", params.size());
  size_t next = 0;
  for (const auto& stage : model.stages()) {
    nn::NamedParameters own;
    stage->collect(own);
    StageInfo info;
    info.first = next;
    for (const auto& [name, p] : own) {
      LT_CHECK(next < params.size() && params[next].same_impl(p), "streaming executor: stage '",
               stage->name(), "' lists its parameters out of the model's order at '", name, "'");
      info.weights.push_back(next++);
    }
    info.last = next;
    const auto* head = dynamic_cast<const models::HeadStage*>(stage.get());
    if (head && head->tied()) {  // the head also reads the embedding matrix
      const auto& embed = dynamic_cast<const models::EmbedStage&>(*model.stages().front());
      for (size_t i = 0; i < params.size(); ++i)
        if (params[i].same_impl(embed.tokens().weight)) info.weights.push_back(i);
      LT_CHECK(info.weights.size() == info.last - info.first + 1,
               "streaming executor: the tied head's embedding weight is not a model parameter");
    }
    stages.push_back(std::move(info));
  }
  LT_CHECK(next == params.size(), "streaming executor: stages list ", next, " of ", params.size(),
           " parameters");
  upload_sources = masters;
  LT_CHECK(options.states_on_disk.empty() || options.states_on_disk.size() == stages.size(),
           "streaming executor: states_on_disk names ", options.states_on_disk.size(),
           " stages, the model has ", stages.size());
  for (size_t s = 0; s < options.states_on_disk.size(); ++s)
    if (options.states_on_disk[s]) disk_stages.push_back(s);
  if (!disk_stages.empty()) {
    setup_state_placement();
    // Note [Stage states on disk]: out before the gradient slabs come in,
    // so that host memory never holds both; states the optimizer made
    // without memory are made here a stage at a time.
    write_out_first_states();
  }
  // Over ranks, state() is a collective gather (ZeRO-1's adamw8bit refuses
  // it), and no state lives on disk there (the trainer refuses ZeRO-1 with
  // states on disk), so nothing was made without memory.
  if (!options.ranks) check_states_have_memory();
  check_masters_have_memory();
  setup_device_stages();
  allocate_grad_slabs();
  stage_squares.assign(stages.size(), 0.0);
  updated.assign(stages.size(), ready_ticket());
  update_work.assign(stages.size(), UpdateWork{});
  update_pieces.assign(stages.size(), {});
  step_finished = ready_ticket();
  if (!options.trace_path.empty()) trace = std::make_unique<TraceRecorder>();
  if (options.max_optimizer_delay_us > 0) {
    optimizer_queue.inject_delays(options.max_optimizer_delay_us, 7);
  }
  if (options.max_state_io_delay_us > 0)
    state_queue.inject_delays(options.max_state_io_delay_us, 11);
}

// Note [Streaming teardown order]: every worker task is finished before a
// member goes.
StreamingExecutor::Impl::~Impl() {
  or_report("draining the copy engines", [&] { drain_copies(); });
  wait_updates_quietly();
  if (gathers_due && !update_failure)
    or_report("the weights' all-gather", [&] { gather_through(stages.size() - 1); });
  // The model outlives the executor: its weights (and the optimizer's
  // states) come back into host memory (Note [Stage states on disk]).
  // Even after a failed update: the model must not keep memory of a device
  // that may go before it.
  if (device_stages_placed)
    or_report("copying the stages on the device back", [&] { place_device_stages(false); });
  if (states_on_disk && !update_failure && options.read_states_back_at_end) {
    release_grad_slabs();
    or_report("reading the states back from disk", [&] { move_all_states(false); });
  }
  device.set_trace(nullptr);
  or_report("writing the trace", [&] { write_trace(); });
  std::lock_guard<std::mutex> lock(failure_mutex);
  if (update_failure && !failure_reported) {
    or_report("an update failed after the last step or sync()",
              [&] { std::rethrow_exception(update_failure); });
  }
}

void StreamingExecutor::Impl::wait_for_update(size_t s) {
  if (s >= state_updated.size() || !state_updated[s].valid()) {
    stats->optimizer_s += exposed_wait(updated[s]);
    count_update_work(s);
    return;
  }
  // A disk stage: its update, then its write-back.
  const double update = exposed_wait(state_updated[s]);
  const double write_back = exposed_wait(updated[s]);
  stats->optimizer_s += update + write_back;
  stats->states_disk_s += std::min(update, state_read_wait_s[s]) + write_back;
  const StateIo& io = state_io[s];
  stats->states_read_bytes += io.read_bytes;
  stats->states_write_bytes += io.write_bytes;
  stats->states_read_s += io.read_s;
  stats->states_write_s += io.write_s;
  count_update_work(s);
}

// The stage's last CPU update, into this step's stats once the forward has
// waited for it (the optimizer thread wrote update_work[s] before updated[s]
// completed), counted once: the stage's next update starts from zero.
void StreamingExecutor::Impl::count_update_work(size_t s) {
  stats->cpu_update_s += update_work[s].seconds;
  stats->cpu_update_parameters += update_work[s].parameters;
  update_work[s] = UpdateWork{};
}

void StreamingExecutor::Impl::allocate_grad_slabs() {
  grad_slabs.clear();
  for (const Tensor& p : params) {
    // In the device's compute dtype (the gradients' own), in memory its
    // download engine copies into fastest (pinned on a GPU).
    grad_slabs.push_back(Tensor::empty(p.shape(), device.compute_dtype(), device.host_memory()));
    grad_slabs.back().zero_();
  }
}

void StreamingExecutor::Impl::release_grad_slabs() {
  for (const Tensor& v : norm_views) v.set_grad(Tensor());
  grad_slabs.clear();
}

std::vector<Tensor> StreamingExecutor::Impl::stage_weights(int stage) const {
  std::vector<Tensor> out;
  for (size_t i : stages[stage].weights) out.push_back(params[i]);
  return out;
}

int StreamingExecutor::Impl::find_slot(int stage) const {
  for (int k = 0; k < 2; ++k)
    if (slots[k].stage == stage) return k;
  return -1;
}

void StreamingExecutor::Impl::load_into(Slot& s, int stage) {
  gather_through(static_cast<size_t>(stage));  // Note [Overlapped all-gathers]
  s.weights.clear();  // frees the previous occupant (a queued copy keeps its own reference)
  s.stage = stage;
  s.ready = Ticket();
  const std::string label = "weights " + model.stages()[stage]->name();
  const std::vector<size_t>& weights = stages[stage].weights;
  // A tied head's embedding on the device is read where it is.
  std::vector<bool> queued(weights.size(), false);
  for (size_t k = 0; k < weights.size(); ++k) {
    const size_t i = weights[k];
    queued[k] = param_on_device(i);
    s.weights.push_back(queued[k]
                            ? device_params[i].weight
                            : device.empty(upload_sources[i].shape(), device.compute_dtype()));
  }
  // The copy reads the master, so it waits for the stage's update: each
  // parameter's for its own piece of it (Note [Updates in pieces]), in the
  // order the pieces run; the rest (all, when the update was queued whole)
  // for the whole update, last. Uploads run in the order they are queued,
  // so the slot is ready when the last one is.
  for (const UpdatePiece& piece : update_pieces[stage]) {
    const auto k = static_cast<size_t>(std::find(weights.begin(), weights.end(), piece.param) -
                                       weights.begin());
    if (k == weights.size()) continue;
    s.ready = device.upload({{s.weights[k], upload_sources[piece.param]}}, piece.done, label);
    queued[k] = true;
  }
  CopyList copies;
  for (size_t k = 0; k < weights.size(); ++k)
    if (!queued[k]) copies.emplace_back(s.weights[k], upload_sources[weights[k]]);
  if (!copies.empty() || !s.ready.valid())
    s.ready = device.upload(std::move(copies), updated[stage], label);
}

// The slot holding `stage`'s weights, ready; also starts copying the
// weights of `next_stage` (-1: none) into the other slot.
int StreamingExecutor::Impl::acquire(int stage, int next_stage) {
  if (on_device[static_cast<size_t>(stage)]) {
    device_slot.stage = stage;
    device_slot.weights.clear();
    for (size_t i : stages[stage].weights) device_slot.weights.push_back(device_params[i].weight);
    if (next_stage >= 0 && find_slot(next_stage) < 0) load(1 - current_slot, next_stage);
    return kDeviceSlot;
  }
  int slot = find_slot(stage);
  if (slot < 0) {
    slot = 1 - current_slot;
    load(slot, stage);
  }
  current_slot = slot;
  if (next_stage >= 0 && next_stage != stage && find_slot(next_stage) < 0) {
    load(1 - slot, next_stage);
  }
  stats->exposed_h2d_s += exposed_wait(slots[slot].ready);
  return slot;
}

void StreamingExecutor::Impl::invalidate_slots() {
  device_slot = Slot();
  tail_slots.clear();
  for (auto& s : slots) {
    s.stage = -1;
    s.weights.clear();
    s.ready = Ticket();
  }
}

// Moves the gradients of the parameters `stage` owns to the host slabs and
// adds their squared sum, on the download engine.
void StreamingExecutor::Impl::copy_out(int stage) {
  copy_out(std::vector<int>{stage});
}

// copy_out of several stages whose gradients are all on the device already
// (the tail step's): one download for the streamed ones, so that the
// compute thread does not wait for a download per stage (at most two in
// flight, Impl::download) while the GPU runs out of queued work.
void StreamingExecutor::Impl::copy_out(const std::vector<int>& stages_out) {
  CopyList copies;
  struct Square {
    double* square;
    nn::NamedParameters views;
  };
  std::vector<Square> squares;
  std::vector<int> streamed;
  std::string label = "grads";
  for (int stage : stages_out) {
    if (options.ranks) {
      copy_out_over_ranks(stage);  // exec/streaming_ranks.cpp
      continue;
    }
    if (on_device[static_cast<size_t>(stage)]) {
      copy_out_on_device(stage);
      continue;
    }
    const StageInfo& info = stages[stage];
    nn::NamedParameters views;
    for (size_t i = info.first; i < info.last; ++i) {
      Tensor g = params[i].grad();
      has_grad[i] = g.defined();
      norm_views[i].set_grad(g.defined() ? grad_slabs[i] : Tensor());
      if (!g.defined()) continue;
      params[i].set_grad(Tensor());
      copies.emplace_back(grad_slabs[i], g.contiguous());
      views.emplace_back(names[i], norm_views[i]);
    }
    stage_squares[stage] = 0;
    squares.push_back({&stage_squares[stage], std::move(views)});
    streamed.push_back(stage);
    label += " " + model.stages()[stage]->name();
  }
  Ticket landed;
  if (!streamed.empty()) {
    landed = download(
        std::move(copies),
        [squares = std::move(squares)] {
          for (const Square& s : squares) *s.square = optim::grad_squared_sum(s.views);
        },
        std::move(label));
    for (size_t k = 0; k < streamed.size(); ++k) downloads.push_back(landed);
  }
  // Queued in the order given (the backward's), a stage on the device among
  // the streamed ones included (Note [Updates during the backward]).
  if (early && !options.ranks)
    for (int stage : stages_out)
      queue_early_update(static_cast<size_t>(stage),
                         on_device[static_cast<size_t>(stage)] ? Ticket() : landed);
}

void StreamingExecutor::Impl::run_forward(int stage, bool recompute) {
  prepare_input(stage);
  const models::Stage& st = *model.stages()[stage];
  WeightBinding bind(stage_weights(stage), use_weights());
  NoGradGuard no_grad;
  std::vector<Tensor> out;
  device.begin_compute_span();
  // Note [One allocation per boundary] (boundary_memory): the chunks'
  // outputs are copied into views of one allocation.
  // Chunks of one sequence length: their outputs differ in the sequence count only.
  const bool one_length = std::all_of(chunks.begin(), chunks.end(), [&](const Chunk& ch) {
    return ch.ids.size(1) == chunks.front().ids.size(1);
  });
  std::vector<Tensor> memory;
  for (size_t c = 0; c < chunks.size(); ++c) {
    Tensor y = model.run_stage(st, input(stage, c), chunks[c].ctx);
    if (c == 0 && one_length) {
      std::vector<Shape> shapes;
      for (const Chunk& ch : chunks) {
        shapes.push_back(y.shape());
        shapes.back().at(0) = ch.ids.size(0);
      }
      memory = boundary_memory(shapes, y.dtype());
    }
    if (memory.empty()) {  // one chunk, or chunks unlike
      out.push_back(std::move(y));
      continue;
    }
    LT_CHECK(y.shape() == memory[c].shape(), "streaming executor: stage ", st.name(), " gave ",
             y.str(), " for a chunk of ", chunks[c].ids.size(0), " sequences");
    memory[c].copy_(y);
    out.push_back(memory[c]);
  }
  end_use(recompute ? &StepStats::recompute_s : &StepStats::compute_s);
  boundaries[stage].device = std::move(out);
}

void StreamingExecutor::Impl::run_head(int stage) {
  prepare_input(stage);
  const models::Stage& st = *model.stages()[stage];
  WeightBinding bind(stage_weights(stage), use_weights());
  device.begin_compute_span();
  dy.assign(chunks.size(), Tensor());
  for (size_t c = 0; c < chunks.size(); ++c) {
    Tensor h = input(stage, c).detach();
    h.set_requires_grad(true);
    Tensor loss = model.run_stage(st, h, chunks[c].ctx);
    stats->loss += loss.item();
    backward(loss);
    dy[c] = h.grad();
  }
  end_use(&StepStats::compute_s);
}

void StreamingExecutor::Impl::run_tail(int stage) {
  prepare_input(stage);
  const int head = num_blocks + 1;
  // The first block is the use's stage (acquired); the later blocks and
  // the head are on the device or in slots of their own, loaded from the
  // use before (StagePlan::tail_slot_stages). The tail's stages are
  // updated last, so their updates and uploads may still run when it
  // starts: each later stage is waited for only when the first chunk
  // reaches it, while the GPU runs that chunk through the blocks before.
  // Its parameters are bound to its copies only then: the optimizer thread
  // updates them through the same tensors until its update is done.
  std::vector<std::vector<Tensor>> copies(static_cast<size_t>(head) + 1);
  std::vector<const Slot*> slot_of(static_cast<size_t>(head) + 1, nullptr);
  copies[static_cast<size_t>(stage)] = use_weights();
  for (int t = stage + 1; t <= head; ++t) {
    std::vector<Tensor>& into = copies[static_cast<size_t>(t)];
    if (on_device[static_cast<size_t>(t)]) {
      for (size_t i : stages[t].weights) into.push_back(device_params[i].weight);
      continue;
    }
    const auto slot = std::find_if(tail_slots.begin(), tail_slots.end(),
                                   [&](const Slot& s) { return s.stage == t; });
    LT_CHECK(slot != tail_slots.end(), "streaming executor: the tail step's ",
             model.stages()[t]->name(), " has no weight slot (a bug in the stage plan)");
    slot_of[static_cast<size_t>(t)] = &*slot;
    into = slot->weights;
  }
  std::deque<WeightBinding> bindings;
  bindings.emplace_back(stage_weights(stage), copies[static_cast<size_t>(stage)]);
  device.begin_compute_span();
  double idle = 0;  // the GPU's wait inside the use, for an update or a slot
  bool first_piece = true;
  dy.assign(chunks.size(), Tensor());
  for (size_t c = 0; c < chunks.size(); ++c) {
    // Note [The tail's own chunks]: the chunk runs in pieces of at most
    // Schedule::tail_chunk_sequences rows, whose input gradients fill the
    // chunk's dy row by row.
    const Tensor& whole = input(stage, c);
    const int64_t rows = whole.size(0);
    const int64_t piece_rows = options.schedule.tail_chunk_sequences > 0
                                   ? std::min(rows, options.schedule.tail_chunk_sequences)
                                   : rows;
    if (piece_rows < rows) dy[c] = device.empty(whole.shape(), whole.dtype());
    for (int64_t r = 0; r < rows; r += piece_rows) {
      const int64_t end = std::min(rows, r + piece_rows);
      const bool whole_chunk = r == 0 && end == rows;
      Tensor x = (whole_chunk ? whole : whole.slice(0, r, end)).detach();
      x.set_requires_grad(true);
      models::StageContext ctx = chunks[c].ctx;
      if (!whole_chunk) ctx.targets = ctx.targets.slice(0, r, end);
      Tensor h = x;
      for (int t = stage; t <= head; ++t) {
        if (first_piece && t > stage) {  // the stage's first use this step
          const double before = stats->optimizer_s;
          wait_for_update(static_cast<size_t>(t));
          idle += stats->optimizer_s - before;
          if (const Slot* slot = slot_of[static_cast<size_t>(t)]) {
            const double waited = exposed_wait(slot->ready);
            stats->exposed_h2d_s += waited;
            idle += waited;
          }
          bindings.emplace_back(stage_weights(t), copies[static_cast<size_t>(t)]);
        }
        h = model.run_stage(*model.stages()[t], h, ctx);
      }
      first_piece = false;
      stats->loss += h.item();
      backward(h);
      if (whole_chunk)
        dy[c] = x.grad();
      else
        dy[c].slice(0, r, end).copy_(x.grad());
    }
  }
  end_use(&StepStats::compute_s, idle);
}

void StreamingExecutor::Impl::run_backward(int stage) {
  prepare_input(stage);
  const models::Stage& st = *model.stages()[stage];
  WeightBinding bind(stage_weights(stage), use_weights());
  device.begin_compute_span();
  for (size_t c = 0; c < chunks.size(); ++c) {
    Tensor x = input(stage, c);
    if (stage > 0) {
      x = x.detach();
      x.set_requires_grad(true);
    }
    models::StageContext ctx = chunks[c].ctx;
    ctx.output_unread = true;  // out only carries dy back into the stage
    Tensor out = model.run_stage(st, x, ctx);
    backward(out, dy[c]);
    dy[c] = stage > 0 ? x.grad() : Tensor();
  }
  end_use(&StepStats::compute_s);
}

// Note [One use queued ahead]
// The compute thread used to wait for the GPU at the end of every stage
// use (finish_compute), so that a use's time was the GPU's. The GPU then
// idled while the thread made the next use ready: copies queued, the update
// and the weights waited for, the slot bound, the first kernels launched.
// That was 0.1-0.35 ms a use, 16-36 ms a step of the 3B at 24 GB (the
// traces of 2026-12-04, session 24). Now the thread waits only for the use
// before the last, so one use stays queued on the GPU while it prepares the
// next. A use's time comes from timing events around it on the compute
// stream (also its span in the trace), and a wait for a copy or an update
// counts as exposed only from when the GPU ran out of the work queued
// before it (exposed_wait). Nothing else changes: copies already order themselves
// after the compute queued before them (exec/cuda/streaming_device_cuda.h).
void StreamingExecutor::Impl::end_use(double StepStats::*counter, double idle_s) {
  device.end_compute_span([st = stats, counter, idle_s, trace = tracing(), name = use_name](
                              Clock::time_point begin, Clock::time_point end) {
    st->*counter += std::chrono::duration<double>(end - begin).count() - idle_s;
    if (trace) trace->span("compute", name, begin, end);
  });
}

double StreamingExecutor::Impl::exposed_wait(const Ticket& ticket) {
  if (!ticket.valid()) return 0;
  double exposed = 0;
  if (ticket.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    device.mark_compute();  // what the GPU has queued as the wait starts
    const auto start = Clock::now();
    ticket.wait();
    const auto end = Clock::now();
    // nullopt: the GPU still runs what was queued, so nothing is exposed.
    if (const std::optional<Clock::time_point> idle = device.compute_idle_since())
      exposed = std::max(0.0, std::chrono::duration<double>(end - std::max(start, *idle)).count());
  }
  ticket.get();  // rethrows the task's error
  return exposed;
}

// Runs the stage plan: per use, its read-backs, its weights (and the next
// use's, loading), its compute, then what it lets go of (AfterUse).
void StreamingExecutor::Impl::run_step() {
  for (size_t u = 0; u < plan.uses.size(); ++u) {
    const StageUse use = plan.uses[u];
    issue_prefetches(u);
    // A stage's first use in a step (the head's is its HeadStep) waits for
    // its update, counted in optimizer_s (states_disk_s for disk stages);
    // the tail step's later stages in run_tail.
    if (use.work == StageWork::Forward || use.work == StageWork::HeadStep ||
        use.work == StageWork::TailStep)
      wait_for_update(static_cast<size_t>(use.stage));
    slot_for_current_use = acquire(use.stage, plan.next_stage[u]);
    if (static_cast<int>(u) == plan.tail_load_use) {
      tail_slots.assign(plan.tail_slot_stages.size(), Slot());
      for (size_t k = 0; k < tail_slots.size(); ++k)
        load_into(tail_slots[k], plan.tail_slot_stages[k]);
    }
    use_name = std::string(stage_work_name(use.work)) + " " + model.stages()[use.stage]->name();
    if (options.observe_use) options.observe_use(u, false);
    switch (use.work) {
      case StageWork::Forward:
        run_forward(use.stage, false);
        break;
      case StageWork::HeadStep:
        run_head(use.stage);
        break;
      case StageWork::Recompute:
        run_forward(use.stage, true);
        break;
      case StageWork::Backward:
        run_backward(use.stage);
        break;
      case StageWork::TailStep:
        run_tail(use.stage);
        break;
    }
    if (options.observe_use) options.observe_use(u, true);
    const AfterUse& after = plan.after[u];
    for (int b : after.release) release_device_copy(b);
    for (int b : after.drop) boundaries[b] = Boundary();
    for (int b : after.offload) offload(b);
    if (use.work == StageWork::TailStep) tail_slots.clear();
    if (after.copy_out_gradients) {
      if (use.work == StageWork::TailStep) {  // the head's first, then the blocks', as one
        std::vector<int> tail;
        for (int t = num_blocks + 1; t >= use.stage; --t) tail.push_back(t);
        copy_out(tail);
      } else {
        copy_out(use.stage);
      }
    }
  }
}

void StreamingExecutor::Impl::enqueue_updates(double lr, double grad_scale) {
  for (auto& pieces : update_pieces) pieces.clear();
  update_device_stages(lr, grad_scale);  // first: the optimizer thread is idle
  if (disk_states) {
    enqueue_updates_on_disk(lr, grad_scale);
  } else if (options.ranks) {
    // Over ranks an upload also waits for its stage's gathers, queued whole.
    for (size_t s = 0; s < stages.size(); ++s) updated[s] = enqueue_update(s, lr, grad_scale, {});
  } else {
    for (size_t s = 0; s < stages.size(); ++s)
      updated[s] = on_device[s] ? ready_ticket() : enqueue_update_in_pieces(s, lr, grad_scale);
  }
  step_finished = optimizer_queue.enqueue([this] {
    try {
      optimizer.finish_step();
    } catch (...) {
      update_failed("the optimizer's end of step");
    }
  });
}

// Note [Updates in pieces]
// With exact clipping the updates start when the backward ends, in forward
// order, and the next forward chases them: stage s's weights upload once
// its update is done. Queued whole, a block's upload (7B: 0.47 GB, 8.5 ms)
// starts only after its last parameter's update, and the forward waits for
// it. Queued a parameter at a time, largest first, each parameter's copy
// waits only for its own update and runs beside the next one's, so after
// the stage's last (smallest) update little is left to copy. The optimizer
// thread runs the pieces in the order queued, so the last piece's ticket
// is followed by the stage's own (updated[s]), which fails when a piece
// did. Updated parameter by parameter, each
// with the same step's scalars, the values are those of the whole update.
Ticket StreamingExecutor::Impl::enqueue_update_in_pieces(size_t s, double lr, double grad_scale) {
  const StageInfo& info = stages[s];
  std::vector<size_t> order(info.last - info.first);
  std::iota(order.begin(), order.end(), info.first);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params[a].numel() > params[b].numel(); });
  std::vector<Ticket> pieces;
  for (size_t i : order) {
    pieces.push_back(enqueue_update_of(s, i, i + 1, lr, grad_scale, {}, {}, nullptr));
    update_pieces[s].push_back({i, pieces.back()});
  }
  // The stage's ticket: done when every piece is (they ran before it), and
  // failed when any did.
  return optimizer_queue.enqueue([pieces = std::move(pieces)] {
    for (const Ticket& t : pieces) t.get();
  });
}

Ticket StreamingExecutor::Impl::enqueue_update(size_t s, double lr, double grad_scale,
                                               Ticket states_read, Ticket gradients,
                                               std::shared_ptr<EarlyStep> early) {
  return enqueue_update_of(s, stages[s].first, stages[s].last, lr, grad_scale,
                           std::move(states_read), std::move(gradients), std::move(early));
}

// Note [A failed update stops the executor]
Ticket StreamingExecutor::Impl::enqueue_update_of(size_t s, size_t first, size_t last, double lr,
                                                  double grad_scale, Ticket states_read,
                                                  Ticket gradients,
                                                  std::shared_ptr<EarlyStep> early) {
  std::vector<bool> with_grad(has_grad.begin() + static_cast<int64_t>(first),
                              has_grad.begin() + static_cast<int64_t>(last));
  return optimizer_queue.enqueue(
      [this, first, last, with_grad, lr, grad_scale, s, states_read = std::move(states_read),
       gradients = std::move(gradients), early = std::move(early), trace = tracing()] {
        const std::string& stage = model.stages()[s]->name();
        try {
          if (gradients.valid()) gradients.get();
        } catch (...) {
          update_failed("copying out the gradients of stage '" + stage + "'");
        }
        try {
          if (states_read.valid()) state_read_wait_s[s] = wait_seconds(states_read);
        } catch (...) {
          update_failed("reading the states of stage '" + stage + "'");
        }
        if (early && !early_update_goes(*early, s)) return;
        const bool whole = last - first == stages[s].last - stages[s].first;
        TraceSpan span(trace, "optimizer", "update " + (whole ? stage : names[first]));
        try {
          int64_t parameters = 0;
          for (size_t i = first; i < last; ++i) {
            if (!with_grad[i - first]) continue;
            params[i].set_grad(grad_slabs[i]);
            parameters += params[i].numel();
          }
          const auto started = std::chrono::steady_clock::now();
          optimizer.update(lr, grad_scale, first, last);
          update_work[s].seconds +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          update_work[s].parameters += parameters;
        } catch (...) {
          for (size_t i = first; i < last; ++i) params[i].set_grad(Tensor());
          update_failed("the optimizer update of stage '" + stage + "'");
        }
        for (size_t i = first; i < last; ++i) params[i].set_grad(Tensor());
      });
}

void StreamingExecutor::Impl::update_failed(const std::string& what) {
  std::string why = "an unknown error";
  try {
    throw;
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
  }
  Error failure("streaming executor: " + what + " failed: " + why +
                " (its parameters may be partly updated, so training stops here)");
  {
    std::lock_guard<std::mutex> lock(failure_mutex);
    if (!update_failure) update_failure = std::make_exception_ptr(failure);
  }
  throw failure;
}

void StreamingExecutor::Impl::wait_updates_quietly() const {
  for (const auto& t : updated)
    if (t.valid()) t.wait();
  if (step_finished.valid()) step_finished.wait();
}

void StreamingExecutor::Impl::rethrow_update_failure() {
  std::lock_guard<std::mutex> lock(failure_mutex);
  if (!update_failure) return;
  failure_reported = true;
  std::rethrow_exception(update_failure);
}

void StreamingExecutor::Impl::settle_after_error() {
  // Nothing in flight may touch what is cleared here: the copy engines'
  // tasks hold the boundaries, the updates set and clear .grad.
  or_report("draining the copy engines", [&] { drain_copies(); });
  wait_updates_quietly();
  last_download = download_before_last = Ticket();
  dy.clear();
  boundaries.clear();
  invalidate_slots();
  drop_device_gradients();
  for (const auto& p : params) p.set_grad(Tensor());
  chunks.clear();
  stats = nullptr;
}

void StreamingExecutor::Impl::write_trace() {
  if (trace && trace->size() > trace_written) {
    trace->write(options.trace_path);
    trace_written = trace->size();
  }
}

StreamingExecutor::StreamingExecutor(const models::CausalLM& model, optim::Optimizer& optimizer,
                                     StreamingDevice& device, StreamingOptions options)
    : model_(model) {
  if (options.schedule.boundaries.empty()) {
    options.schedule = Schedule::all_gpu(static_cast<int>(model.config().num_hidden_layers));
  }
  impl_ = std::make_unique<Impl>(model, optimizer, device, std::move(options));
}

StreamingExecutor::StreamingExecutor(const models::CausalLM& model, optim::Optimizer& optimizer,
                                     std::unique_ptr<StreamingDevice> device,
                                     StreamingOptions options)
    : model_(model), owned_device_(std::move(device)) {
  LT_CHECK(owned_device_ != nullptr, "streaming executor: no device");
  if (options.schedule.boundaries.empty()) {
    options.schedule = Schedule::all_gpu(static_cast<int>(model.config().num_hidden_layers));
  }
  impl_ = std::make_unique<Impl>(model, optimizer, *owned_device_, std::move(options));
}

const std::vector<StageUse>& StreamingExecutor::stage_uses() const {
  return impl_->plan.uses;
}

// impl_ goes before owned_device_ (declared after it): ~Impl drains the
// device's copy engines while the device exists.
StreamingExecutor::~StreamingExecutor() = default;

void StreamingExecutor::wait_for_updates() {
  impl_->wait_updates_quietly();
  if (!impl_->stages.empty()) impl_->gather_through(impl_->stages.size() - 1);
  impl_->write_trace();
  impl_->rethrow_update_failure();
}

StagedStates* StreamingExecutor::sync_staged() {
  if (!impl_->disk_states) return nullptr;
  wait_for_updates();
  return impl_->staged.get();
}

void StreamingExecutor::sync() {
  wait_for_updates();
  impl_->place_device_stages(false);  // Note [Stages on the device]
  if (impl_->states_on_disk) {
    impl_->release_grad_slabs();
    impl_->move_all_states(false);
  }
}

StepStats StreamingExecutor::step(const std::vector<data::Batch>& micro_batches,
                                  const StepOptions& options) {
  Impl& m = *impl_;
  m.rethrow_update_failure();
  if (m.disk_states && !m.states_on_disk) m.move_all_states(true);
  if (m.grad_slabs.empty()) m.allocate_grad_slabs();  // released by sync()
  m.place_device_stages(true);                        // Note [Stages on the device]
  // The traced steps' updates ran in the next step's forward, which waited
  // for them all: from here the trace is whole, and it is written now too,
  // so a run stopped without sync() still leaves it.
  if (m.steps_started == m.options.trace_steps + 1) m.write_trace();
  const auto start = Clock::now();
  cpu_allocator().reset_peak();
  m.device.memory().reset_peak();
  StepStats stats;
  m.stats = &stats;
  ++m.steps_started;
  m.device.set_trace(m.tracing());
  for (const auto& mb : micro_batches) stats.target_count += mb.target_count;
  if (m.options.ranks) stats.target_count = m.begin_sums_over_ranks(stats.target_count);
  stats.tokens = computed_tokens(micro_batches, m.options.ranks ? stats.target_count : 0);
  // As the resident executor: each piece's loss is divided by the global
  // target count, so the sum over pieces is the mean over the global batch.
  const double denominator = static_cast<double>(std::max<int64_t>(stats.target_count, 1));
  m.chunks.clear();
  // Contexts are made before the compute scope: the model's RoPE table is
  // host state that outlives the step.
  for (auto& piece : split_rows(micro_batches, m.options.schedule.chunk_sequences)) {
    models::StageContext ctx = m.model.context(piece.ids.size(1), piece.targets, denominator);
    m.chunks.push_back({piece.ids, std::move(ctx)});
  }
  // Nothing counted: no gradient, no update (as resident); but see below
  // for a rank of several.
  if (m.chunks.empty() && !m.options.ranks) {
    m.stats = nullptr;
    stats.seconds = seconds_since(start);
    return stats;
  }
  // A rank of several with no targets in its shard computes nothing but
  // still takes part in the sums and the update below.
  const bool updates_early = m.begin_early_updates(options);
  if (!m.chunks.empty()) {
    try {
      auto scope = m.device.compute_scope();
      m.boundaries.assign(static_cast<size_t>(m.num_blocks) + 1, Impl::Boundary());
      m.disk_last_write = m.disk_write_before_last = Ticket();  // not a failed step's
      m.place_rope();
      m.upload_batch();
      m.downloads.clear();
      m.run_step();
      m.device.drain_compute();  // Note [One use queued ahead]: the last uses' times
      m.dy.clear();
      m.boundaries.clear();
      m.invalidate_slots();
    } catch (...) {
      try {
        m.device.drain_compute();  // no span outlives `stats`
      } catch (...) {
        // The step's own error is the one reported.
      }
      // Leave the executor usable: no copy in flight, no gradient left behind.
      // An update's failure, met here through a ticket or not, is the error
      // (Note [A failed update stops the executor]). Updates queued during
      // the backward are made (Note [Updates during the backward]).
      m.abandon_early_updates();
      m.settle_after_error();
      m.rethrow_update_failure();
      throw;
    }
  }
  for (const auto& t : m.downloads) stats.exposed_d2h_s += wait_seconds(t);
  m.downloads.clear();
  m.last_download = m.download_before_last = Ticket();
  m.chunks.clear();
  // Stage sums added in the chain's order, whatever order they landed in.
  double squares = 0;
  if (m.options.ranks) {
    squares = m.finish_sums_over_ranks(stats);
  } else {
    for (double s : m.stage_squares) squares += s;
  }
  stats.grad_norm = std::sqrt(squares);

  if (updates_early) {
    m.end_early_updates(stats);  // Note [Updates during the backward]
  } else if (!std::isfinite(stats.loss) || !std::isfinite(stats.grad_norm)) {
    stats.skipped = true;
    m.drop_device_gradients();
  } else {
    m.enqueue_updates(options.lr, optim::clip_scale(stats.grad_norm, options.max_grad_norm));
    // Note [Overlapped all-gathers]; shared weights need no gather.
    if (m.options.zero && !m.options.zero->shares_weights()) m.defer_gathers();
  }
  if (updates_early || !stats.skipped) {
    if (!m.options.overlap_optimizer) {
      const auto t0 = Clock::now();
      m.wait_updates_quietly();
      stats.optimizer_s += seconds_since(t0);
      m.stats = nullptr;
      m.rethrow_update_failure();
    }
  }
  m.stats = nullptr;
  stats.seconds = seconds_since(start);
  stats.bubbles_s =
      std::max(0.0, stats.seconds - stats.compute_s - stats.recompute_s - stats.exposed_h2d_s -
                        stats.exposed_d2h_s - stats.exposed_disk_s - stats.optimizer_s);
  stats.peak_bytes["host"] = cpu_allocator().stats().peak_bytes;
  stats.peak_bytes[m.device.memory_space()] = m.device.memory().stats().peak_bytes;
  return stats;
}

}  // namespace lt::exec
