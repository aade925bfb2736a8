#include "exec/resident.h"

#include <chrono>
#include <cmath>

#include "core/stream.h"
#include "exec/forward_backward.h"
#include "exec/work_queue.h"
#include "ops/index_checks.h"
#include "ops/op_profile.h"
#include "optim/clip.h"
#include "optim/grad_norm_partials.h"

namespace lt::exec {

namespace {

// Waits for the device's queued work, so that a phase's wall time is its
// real duration (a no-op on the CPU, whose work is done when enqueued).
void finish_queued_work(Device device) {
  current_stream(device).synchronize();
}

}  // namespace

ResidentExecutor::ResidentExecutor(const models::CausalLM& model, optim::Optimizer& optimizer,
                                   DType compute_dtype, CrossRankSum* ranks, int64_t bucket_bytes)
    : model_(model), optimizer_(optimizer), params_(model.parameters()), ranks_(ranks) {
  LT_CHECK(compute_dtype == DType::F32 || compute_dtype == DType::BF16,
           "resident executor: compute dtype (train.dtype) must be f32 or bf16, got ",
           dtype_name(compute_dtype));
  for (const auto& [name, p] : params_) {
    LT_CHECK(p.dtype() == DType::F32 && p.device() == model.device(),
             "resident executor: master parameter '", name, "' must be f32 on ",
             model.device().str(), ", got ", p.str());
  }
  if (compute_dtype != DType::F32) {
    compute_copy_ = std::make_unique<models::CausalLM>(
        models::CausalLM::uninitialized(model.config(), compute_dtype));
    compute_copy_->to(model.device(), compute_dtype, /*keep_values=*/false);
    // train.compile: the copy's blocks are the ones that run.
    compute_copy_->use_compiled_blocks(model.compiled_blocks());
    compute_params_ = compute_copy_->parameters();
    LT_CHECK(compute_params_.size() == params_.size(), "resident executor: the compute copy lists ",
             compute_params_.size(), " parameters, the masters ", params_.size());
    // The optimizer writes bf16(master) into the compute copy's parameters
    // in its update pass (and fills them now), so no separate refresh pass
    // runs after each step. Optimizer parameter i is master i.
    LT_CHECK(optimizer_.size() == params_.size(), "resident executor: the optimizer holds ",
             optimizer_.size(), " parameters, the model ", params_.size());
    for (size_t i = 0; i < params_.size(); ++i) {
      optimizer_.set_bf16_shadow(i, compute_params_[i].second);
    }
  } else {
    compute_params_ = params_;
  }
  grad_norm_ = std::make_unique<optim::GradNormPartials>(compute_params_);
  if (ranks_) buckets_ = std::make_unique<GradientBuckets>(compute_params_, bucket_bytes, *ranks_);
}

void ResidentExecutor::forward_backward_over_ranks(const std::vector<data::Batch>& micro_batches,
                                                   StepStats& stats) {
  const Device device = model_.device();
  double targets = 0;
  for (const auto& mb : micro_batches) targets += static_cast<double>(mb.target_count);
  ranks_->sum(std::span<double>(&targets, 1));
  BackwardHooks hooks;
  hooks.before_last_backward = [this] { buckets_->arm(); };
  forward_backward(compute_model(), micro_batches, nullptr, stats, hooks,
                   static_cast<int64_t>(targets));
  {
    // The buckets the backward did not start (all of them on a rank whose
    // shard had no targets) start here; every rank then holds the sums.
    ops::OpProfileScope profile("gradient all-reduce", device);
    buckets_->finish();
  }
  finish_queued_work(device);
  ops::check_index_errors(device);
  double totals[2] = {stats.loss, static_cast<double>(stats.tokens)};
  ranks_->sum(totals);
  stats.loss = totals[0];
  stats.tokens = static_cast<int64_t>(totals[1]);
  stats.target_count = static_cast<int64_t>(targets);
  // The norm of the summed gradients (every one is taken by finish()).
  grad_norm_->begin();
  grad_norm_->finish();
}

StepStats ResidentExecutor::step(const std::vector<data::Batch>& micro_batches,
                                 const StepOptions& options) {
  const Device device = model_.device();
  const auto start = std::chrono::steady_clock::now();
  cpu_allocator().reset_peak();
  Allocator* gpu = device.is_cuda() ? &default_allocator(device) : nullptr;
  if (gpu) gpu->reset_peak();
  StepStats stats;
  for (auto& [name, p] : compute_params_) p.set_grad(Tensor());
  if (ranks_) {
    forward_backward_over_ranks(micro_batches, stats);
  } else {
    forward_backward(compute_model(), micro_batches, grad_norm_.get(), stats);
    finish_queued_work(device);
    ops::check_index_errors(device);
  }
  stats.grad_norm = std::sqrt(grad_norm_->squared_sum());
  stats.compute_s = seconds_since(start);

  const auto opt_start = std::chrono::steady_clock::now();
  if (!std::isfinite(stats.loss) || !std::isfinite(stats.grad_norm)) {
    stats.skipped = true;
  } else if (stats.target_count > 0) {
    if (compute_copy_) {
      // AdamW reads bf16 gradients directly (widened exactly) into the f32 update.
      for (size_t i = 0; i < params_.size(); ++i) {
        params_[i].second.set_grad(compute_params_[i].second.grad());
      }
    }
    // The update also writes the bf16 compute copy (the shadows).
    ops::OpProfileScope profile("optimizer adamw", device);
    // train.clip_with_previous_norm: the factor of the step before's norm,
    // as the streaming executor's updates during the backward use it; the
    // reference for them.
    const double scale = clip_scale_before_backward(options).value_or(
        optim::clip_scale(stats.grad_norm, options.max_grad_norm));
    optimizer_.step(options.lr, scale);
  }
  // Free gradients between steps.
  for (auto& [name, p] : params_) p.set_grad(Tensor());
  for (auto& [name, p] : compute_params_) p.set_grad(Tensor());
  finish_queued_work(device);
  stats.optimizer_s = seconds_since(opt_start);
  stats.seconds = seconds_since(start);
  stats.peak_bytes["host"] = cpu_allocator().stats().peak_bytes;
  if (gpu) stats.peak_bytes["gpu"] = gpu->stats().peak_bytes;
  return stats;
}

}  // namespace lt::exec
