#pragma once
// AdamW with an fp32 master, as torch.optim.AdamW computes it
// (decoupled weight decay, bias-corrected moments; the formula and operation
// order are in optim/adamw_kernel.h).
//
// - Parameters are the master: f32, contiguous tensors updated in place, on
//   the CPU (or, in a CUDA build, a CUDA device; their states live there too).
// - Gradients arrive as f32 or bf16 (Tensor::grad()); bf16 is widened exactly.
//   A parameter whose gradient is undefined is skipped, and its moments and
//   its own step count stay as they were, as torch does.
// - State: exp_avg (m) and exp_avg_sq (v) in f32, allocated once here and
//   never per step (8 bytes per parameter), and a per-parameter step count t
//   for the bias correction (torch keeps `step` per parameter, so a parameter
//   skipped in some steps has a smaller t than its neighbours).
//
// update() checks every gradient, then hands each parameter to the backend
// of its device: on the CPU one pass cut into fixed-size chunks that the
// thread pool updates in parallel (the result does not depend on the number
// of threads); on a CUDA device, in a CUDA build, one multi-tensor launch
// (optim/cuda/adamw.h), the same bit for bit.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/simd.h"

namespace lt::optim {

class CompiledUpdateKernels;  // optim/compiled_update_kernels.h

// Field names follow the trainer's config keys (optim.*), which is how
// validation errors name them.
struct AdamWOptions {
  double lr = 1e-3;  // the base rate; update() takes the scheduled rate
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// Throws lt::Error naming the field (optim.lr, optim.betas[0], ...).
void validate(const AdamWOptions& options);

class AdamW final : public Optimizer {
 public:
  // `no_decay_substrings`: a parameter whose name contains any of them gets
  // weight decay 0 (e.g. {"bias", "norm"}); an empty list decays every
  // parameter, as torch.optim.AdamW(model.parameters()) does.
  // `states_without_memory` (per parameter, missing = false): those
  // parameters' moments are made without memory (tensor_without_memory),
  // for an executor to give them memory and reset_state() them.
  AdamW(const nn::NamedParameters& params, AdamWOptions options,
        std::vector<std::string> no_decay_substrings = {},
        const std::vector<bool>& states_without_memory = {});

  size_t size() const override { return params_.size(); }
  // One update of every parameter in [first, last) that has a gradient.
  // `lr` is this step's rate (from the schedule); every gradient is
  // multiplied by `grad_scale` first (the clip factor from clip_scale, or
  // 1). Both must be finite: a step with a non-finite gradient norm is to
  // be skipped by the caller. step() = update(all) + finish_step().
  void update(double lr, double grad_scale, size_t first, size_t last) override;
  void finish_step() override { ++step_count_; }
  void set_bf16_shadow(size_t index, Tensor shadow) override;
  void reset_state(size_t index) override;
  // Each parameter's update then runs compiled_adamw_update, in pieces (on
  // the CPU or a CUDA device: the same operations in the same order, so
  // the same values as the hand-written kernels).
  bool use_compiled_updates(std::shared_ptr<compile::KernelCache> cache) override;
  int64_t compiled_updates() const override { return compiled_updates_; }
  std::string compiled_fallback() const override { return compiled_fallback_; }

  // The instruction set of the CPU kernel (active_isa() unless set; the
  // result is the same bit for bit on every one, only the speed differs).
  Isa isa() const { return isa_; }
  void set_isa(Isa isa);

  // Number of finished steps so far.
  int64_t step_count() const { return step_count_; }
  const AdamWOptions& options() const { return options_; }
  const nn::NamedParameters& params() const { return params_; }
  // The weight decay parameter i receives (options.weight_decay or 0).
  double weight_decay_of(size_t i) const { return decay_.at(i); }

  // Checkpoint state, in parameter order:
  //   "<name>.exp_avg", "<name>.exp_avg_sq"  f32, the parameter's shape
  //   "<name>.step"                          i64 scalar: this parameter's t
  //   "step"                                 i64 scalar: step_count()
  // state() returns the live tensors (views, no copy): save them before the
  // next step(). load_state() copies values in; it requires exactly these
  // names with these shapes and dtypes, so a checkpoint from another model
  // or optimizer is refused with the offending name.
  NamedTensors state() const override;
  void load_state(const NamedTensors& state) override;

 private:
  nn::NamedParameters params_;
  AdamWOptions options_;
  std::vector<std::string> no_decay_substrings_;
  std::vector<double> decay_;         // per parameter
  std::vector<Tensor> exp_avg_;       // per parameter, f32, contiguous
  std::vector<Tensor> exp_avg_sq_;    // per parameter, f32, contiguous
  std::vector<int64_t> param_steps_;  // per parameter: t of its last update
  std::vector<Tensor> shadows_;       // per parameter: bf16 shadow or undefined
  Isa isa_ = active_isa();
  int64_t step_count_ = 0;
  // train.compile: the update's kernels, resolved once (compiled_update_kernels.h)
  std::shared_ptr<CompiledUpdateKernels> compiled_;
  int64_t compiled_updates_ = 0;
  std::string compiled_fallback_;
};

}  // namespace lt::optim
