#pragma once
// The resident executor: the whole model on one device, plain autograd
// through the whole stage chain. It is the reference every other executor
// is checked against, and the fast path when the model fits.
//
// Mixed precision (train.dtype bf16 on a GPU): the model handed in holds
// the f32 master parameters, which the optimizer updates; forward and
// backward run on a compute copy of the model in the compute dtype on the
// same device, whose gradients (in the compute dtype) the optimizer reads
// directly. After each update the copy is refreshed from the masters (one
// cast kernel per tensor). With compute dtype f32 the masters are the
// compute model and there is no copy.
//
// Data parallel (a CrossRankSum given): each rank runs its shard of the
// global batch with the global target count as the loss's denominator, the
// ranks' gradients are summed in buckets started during the last backward
// as their gradients become final (exec/gradient_buckets.h), and the
// gradient norm is taken of the sum, so every rank clips and updates alike
// and the weights stay equal.
#include <memory>

#include "exec/cross_rank_sum.h"
#include "exec/executor.h"
#include "exec/gradient_buckets.h"
#include "models/causal_lm.h"
#include "optim/grad_norm_partials.h"
#include "optim/optimizer.h"

namespace lt::exec {

class ResidentExecutor final : public Executor {
 public:
  // `model`: the masters (f32), on the CPU or a CUDA device; `optimizer`
  // was built over model.parameters(). `compute_dtype`: f32 or bf16.
  // `ranks`: data parallel over these ranks (null: one process); outlives
  // the executor. `bucket_bytes`: the gradient buckets' size (dist.bucket_mb).
  ResidentExecutor(const models::CausalLM& model, optim::Optimizer& optimizer,
                   DType compute_dtype = DType::F32, CrossRankSum* ranks = nullptr,
                   int64_t bucket_bytes = kDefaultBucketBytes);
  static constexpr int64_t kDefaultBucketBytes = int64_t{25} << 20;  // dist.bucket_mb's default
  StepStats step(const std::vector<data::Batch>& micro_batches,
                 const StepOptions& options) override;
  const char* name() const override { return "resident"; }
  // The model forward and backward run on: the masters, or their copy in
  // the compute dtype (for evaluation: what was trained, as it computes).
  const models::CausalLM& compute_model() const { return compute_copy_ ? *compute_copy_ : model_; }
  const models::CausalLM& eval_model() const override { return compute_model(); }

 private:
  void forward_backward_over_ranks(const std::vector<data::Batch>& micro_batches, StepStats& stats);

  const models::CausalLM& model_;
  optim::Optimizer& optimizer_;
  nn::NamedParameters params_;  // the masters, in optimizer order
  std::unique_ptr<models::CausalLM> compute_copy_;
  nn::NamedParameters compute_params_;  // = params_ without a copy; same order and shapes
  // The gradient norm's partial sums, taken from compute_params_' gradients
  // during the last micro-batch's backward (optim/grad_norm_partials.h).
  std::unique_ptr<optim::GradNormPartials> grad_norm_;
  CrossRankSum* ranks_ = nullptr;
  std::unique_ptr<GradientBuckets> buckets_;  // with ranks_, over compute_params_
};

}  // namespace lt::exec
