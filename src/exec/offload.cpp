#include "exec/offload.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "exec/forward_backward.h"
#include "exec/offload_impl.h"
#include "ops/index_checks.h"
#include "optim/clip.h"

namespace lt::exec {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

OffloadExecutor::Impl::Impl(const models::CausalLM& m, optim::Optimizer& o,
                            std::unique_ptr<StreamingDevice> d, OffloadOptions opts)
    : model(m), optimizer(o), device(std::move(d)), options(std::move(opts)) {
  LT_CHECK(device, "offload executor: no device");
  if (options.zenflow) validate(options.zenflow_options);
  for (auto& [name, p] : model.parameters()) {
    // A master without memory (its disk stage's values come from
    // options.fill_masters) is a host tensor once it has it.
    const bool has_memory = p.storage() != nullptr;
    LT_CHECK((!has_memory || p.device().is_cpu()) && p.dtype() == DType::F32 && p.is_contiguous(),
             "offload executor: master parameter '", name,
             "' must be a contiguous f32 CPU tensor, got ", has_memory ? p.str() : "no memory");
    names.push_back(name);
    masters.push_back(p);
  }
  LT_CHECK(optimizer.size() == masters.size(), "offload executor: the optimizer holds ",
           optimizer.size(), " parameters, the model ", masters.size());
  {
    // Inside the scope the stand-in's allocations count as device memory.
    auto scope = device->compute_scope();
    compute.emplace(models::CausalLM::uninitialized(model.config(), device->compute_dtype()));
    const Device where = device->memory().device();
    if (!where.is_cpu()) compute->to(where, device->compute_dtype(), /*keep_values=*/false);
  }
  // train.compile: the copy computes, so its blocks are the compiled ones.
  compute->use_compiled_blocks(model.compiled_blocks());
  for (auto& [name, p] : compute->parameters()) weights.push_back(p);
  taken_early.assign(weights.size(), 0);
  if (options.zenflow) {
    // The hooks live in the device weights, which this object owns.
    for (size_t i = 0; i < weights.size(); ++i)
      weights[i].register_grad_ready_hook([this, i](const Tensor&) {
        if (take_early) take_gradient_early(i);
      });
  }
  LT_CHECK(weights.size() == masters.size(), "offload executor: the device copy lists ",
           weights.size(), " parameters, the masters ", masters.size());
  size_t next = 0;
  for (const auto& stage : model.stages()) {
    nn::NamedParameters own;
    stage->collect(own);
    stages.push_back({next, next + own.size()});
    next += own.size();
  }
  LT_CHECK(next == masters.size(), "offload executor: stages list ", next, " of ", masters.size(),
           " parameters");
  const int sets = options.zenflow ? 2 : 1;
  for (int s = 0; s < sets; ++s) {
    for (const Tensor& p : masters)
      slabs[s].push_back(Tensor::empty(p.shape(), device->compute_dtype(), device->host_memory()));
    slab_filled[s].assign(masters.size(), 0);
  }
  nn::NamedParameters named;
  for (size_t i = 0; i < weights.size(); ++i) named.emplace_back(names[i], weights[i]);
  norm = std::make_unique<optim::GradNormPartials>(named);
  cpu_update = ready_ticket();
  // The first uploads; with states on disk after every disk stage has been
  // written out (its masters may have had no memory before).
  setup_state_placement();
  for (const StageRange& r : stages)
    uploaded.push_back(upload_weights(r.first, r.last, ready_ticket(), "initial weights"));
  if (options.max_optimizer_delay_us > 0)
    optimizer_queue.inject_delays(options.max_optimizer_delay_us, 11);
}

OffloadExecutor::Impl::~Impl() {
  // Every queued task and copy reads members: wait for all, whatever failed.
  try {
    cpu_update.wait();
    optimizer_queue.enqueue([] {}).wait();
    for (const Ticket& t : uploaded) t.wait();
    for (const Ticket& t : early_merge_uploads) t.wait();
    wait_seconds(device->download({}, {}, "drain"));
    state_queue.enqueue([] {}).wait();
    // The model outlives the executor (Note [Offload states on disk]).
    if (states_on_disk && options.read_states_back_at_end) move_all_states(false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lazytrain: offload executor: teardown: %s\n", e.what());
  } catch (...) {
  }
}

Ticket OffloadExecutor::Impl::upload_weights(size_t first, size_t last, Ticket after,
                                             const std::string& label,
                                             const std::function<bool(size_t)>& include) {
  std::vector<size_t> params;
  for (size_t i = first; i < last; ++i) {
    if (!include || include(i)) params.push_back(i);
  }
  return upload_weights(params, std::move(after), label);
}

Ticket OffloadExecutor::Impl::upload_weights(const std::vector<size_t>& params, Ticket after,
                                             const std::string& label) {
  CopyList copies;
  for (size_t i : params) {
    copies.emplace_back(weights[i], upload_source(i));
    if (stats) stats->h2d_bytes += static_cast<int64_t>(weights[i].nbytes());
  }
  if (copies.empty()) return after;
  return device->upload(std::move(copies), std::move(after), label);
}

Ticket OffloadExecutor::Impl::download_gradients(size_t first, size_t last, int set,
                                                 const std::string& label,
                                                 const std::function<bool(size_t)>& include) {
  CopyList copies;
  for (size_t i = first; i < last; ++i) {
    if (include && !include(i)) continue;
    const Tensor& g = weights[i].grad();
    slab_filled[set][i] = g.defined();
    if (!g.defined()) continue;
    copies.emplace_back(slabs[set][i], g.contiguous());
    stats->d2h_bytes += static_cast<int64_t>(g.nbytes());
  }
  if (copies.empty()) return ready_ticket();
  return device->download(std::move(copies), {}, label);
}

Ticket OffloadExecutor::Impl::update_on_host(size_t first, size_t last, int set, double lr,
                                             double scale, Ticket after) {
  // The task reads slab_filled as it is now: a later download may refill it.
  std::vector<char> filled(slab_filled[set].begin() + static_cast<std::ptrdiff_t>(first),
                           slab_filled[set].begin() + static_cast<std::ptrdiff_t>(last));
  return optimizer_queue.enqueue(
      [this, first, last, set, lr, scale, after = std::move(after), filled = std::move(filled)] {
        after.get();  // a failed read of a disk stage is its own error already
        for (size_t i = first; i < last; ++i)
          masters[i].set_grad(filled[i - first] ? slabs[set][i] : Tensor());
        try {
          optimizer.update(lr, scale, first, last);
        } catch (const std::exception& e) {
          for (size_t i = first; i < last; ++i) masters[i].set_grad(Tensor());
          fail("offload executor: the optimizer update of parameters ", first, " to ", last - 1,
               " failed: ", e.what(), " (they may be partly updated, so training stops here)");
        }
        for (size_t i = first; i < last; ++i) masters[i].set_grad(Tensor());
      });
}

void OffloadExecutor::Impl::wait_uploads() {
  for (const Ticket& t : uploaded) stats->exposed_h2d_s += wait_seconds(t);
  for (const Ticket& t : early_merge_uploads) stats->exposed_h2d_s += wait_seconds(t);
  early_merge_uploads.clear();
}

void OffloadExecutor::Impl::settle_downloads() {
  for (const Ticket& t : pending_downloads) {
    const double waited = wait_seconds(t);
    if (stats) stats->exposed_d2h_s += waited;
  }
  pending_downloads.clear();
  if (drop_due) drop_device_gradients();
  drop_due = false;
  std::fill(taken_early.begin(), taken_early.end(), 0);
}

void OffloadExecutor::Impl::drop_device_gradients() {
  for (const Tensor& w : weights) w.set_grad(Tensor());
}

double OffloadExecutor::Impl::forward_backward_on_device(
    const std::vector<data::Batch>& micro_batches, optim::GradNormPartials* partials,
    const BackwardHooks& hooks, int64_t targets_over_ranks) {
  auto scope = device->compute_scope();
  forward_backward(*compute, micro_batches, partials, *stats, hooks, targets_over_ranks);
  device->finish_compute();
  ops::check_index_errors(compute->device());
  return partials ? partials->squared_sum() : 0.0;
}

OffloadExecutor::Impl::StepRecord::StepRecord(Impl& impl, StepStats& st)
    : impl_(impl), st_(st), start_(Clock::now()) {
  cpu_allocator().reset_peak();
  impl.device->memory().reset_peak();
  impl.stats = &st;
}

void OffloadExecutor::Impl::StepRecord::finish() {
  st_.seconds = seconds_since(start_);
  st_.bubbles_s = std::max(
      0.0, st_.seconds - st_.compute_s - st_.exposed_h2d_s - st_.exposed_d2h_s - st_.optimizer_s);
  st_.peak_bytes["host"] = cpu_allocator().stats().peak_bytes;
  st_.peak_bytes[impl_.device->memory_space()] = impl_.device->memory().stats().peak_bytes;
}

StepStats OffloadExecutor::Impl::run_step(const std::vector<data::Batch>& micro_batches,
                                          const StepOptions& o) {
  StepStats st;
  StepRecord record(*this, st);
  // The weights the last update uploaded (ZenFlow: its merge) must have
  // landed, and ZenFlow's own columns be put back over them, before the
  // forward reads them.
  wait_uploads();
  if (rescatter_due) rescatter_columns();
  if (disk_states && !states_on_disk) move_all_states(true);  // read back by sync()
  const bool zen = zenflow_step();
  const auto compute_start = Clock::now();
  const int64_t targets = options.ranks ? targets_over_ranks(micro_batches) : 0;
  zen_step = zen;
  BackwardHooks hooks;
  if (zen) {
    // The last window's gradients leave while this step's first forward
    // runs; the backward after it makes new ones.
    hooks.before_first_backward = [this] { settle_downloads(); };
  }
  // The synchronous step sends every gradient as it becomes final, ZenFlow
  // those of a window's last step (Note [ZenFlow's early download]); not
  // over ranks, where the gradients are summed first (Note [ZenFlow over
  // ranks]).
  if (options.early_download && !options.ranks && (!zen || window_end_known()))
    hooks.before_last_backward = [this] {
      take_early = true;
      if (zen_step) begin_early_merge();
    };
  struct Disarm {
    bool& flag;
    ~Disarm() { flag = false; }
  } disarm{take_early};
  const double squared =
      forward_backward_on_device(micro_batches, zen ? nullptr : norm.get(), hooks, targets);
  if (options.ranks) sum_zenflow_step_over_ranks(targets);
  st.compute_s = seconds_since(compute_start);
  if (zen) {
    zenflow_update(o);
  } else {
    st.grad_norm = std::sqrt(squared);
    synchronous_update(o);
  }
  ++steps;
  record.finish();
  return st;
}

void OffloadExecutor::Impl::synchronous_update(const StepOptions& o) {
  const bool finite = std::isfinite(stats->loss) && std::isfinite(stats->grad_norm);
  if (!finite) stats->skipped = true;
  if (!finite || stats->target_count == 0) {
    settle_downloads();  // copies the hooks queued still read the gradients
    drop_device_gradients();
    return;
  }
  // A window of ZenFlow left open when warm-up ends cannot exist (warm-up
  // comes first), so every gradient here is this step's. Those the last
  // backward's hooks took are on their way already.
  for (const StageRange& r : stages)
    pending_downloads.push_back(
        download_gradients(r.first, r.last, 0, "grads", [&](size_t i) { return !taken_early[i]; }));
  drop_due = true;
  settle_downloads();
  const double scale = optim::clip_scale(stats->grad_norm, o.max_grad_norm);
  const auto wait_start = Clock::now();
  // Each stage's upload after its update (and a disk stage's write-back).
  update_stages(0, o.lr, scale, [&](size_t s, Ticket done) {
    uploaded[s] = upload_weights(stages[s].first, stages[s].last, std::move(done), "weights");
  });
  optimizer_queue.enqueue([this] { optimizer.finish_step(); });
  // The synchronous offload: the step ends when the new weights are on the device.
  for (const Ticket& t : uploaded) wait_seconds(t);
  count_state_io();
  stats->optimizer_s += seconds_since(wait_start);
}

// ---- the executor ----

OffloadExecutor::OffloadExecutor(const models::CausalLM& model, optim::Optimizer& optimizer,
                                 std::unique_ptr<StreamingDevice> device, OffloadOptions options)
    : options_(options),
      impl_(std::make_unique<Impl>(model, optimizer, std::move(device), std::move(options))) {}

OffloadExecutor::~OffloadExecutor() = default;

StepStats OffloadExecutor::step(const std::vector<data::Batch>& micro_batches,
                                const StepOptions& options) {
  // Over ranks ZenFlow's steps take run_step, with their sums (Note
  // [ZenFlow over ranks]); its warm-up steps are the synchronous offload's.
  return impl_->options.ranks && !impl_->zenflow_step()
             ? impl_->run_step_over_ranks(micro_batches, options)
             : impl_->run_step(micro_batches, options);
}

void OffloadExecutor::sync() {
  StepStats ignored;
  impl_->stats = &ignored;
  impl_->wait_uploads();
  impl_->settle_downloads();
  if (impl_->rescatter_due) impl_->rescatter_columns();
  impl_->optimizer_queue.enqueue([] {}).get();
  impl_->device->finish_compute();
  impl_->stats = nullptr;
}

void OffloadExecutor::sync_masters() {
  StepStats ignored;
  impl_->stats = &ignored;
  impl_->finish_masters();
  impl_->stats = nullptr;
  sync();
  if (impl_->states_on_disk) impl_->move_all_states(false);
}

void OffloadExecutor::resume_at(int64_t step) {
  impl_->steps = step;  // the columns are chosen at the first step, as after a checkpoint
}

const models::CausalLM& OffloadExecutor::eval_model() const {
  return *impl_->compute;
}

}  // namespace lt::exec
