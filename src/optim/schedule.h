#pragma once
// Learning-rate schedules with linear warmup, as Hugging Face transformers'
// get_constant_schedule_with_warmup, get_linear_schedule_with_warmup and
// get_cosine_schedule_with_warmup (num_cycles = 0.5) compute them, plus a
// min_lr floor on the decay phase.
//
// `step` is the 0-based index of the optimizer step, and lr_at(step) is the
// rate that step uses. This matches HF's LambdaLR, which sets the rate for
// step 0 at construction and advances after each optimizer.step(). With
// W = warmup_steps and T = total_steps, HF's multiplier is (in double):
//
//   warmup (step < W):  step / max(1, W)
//   constant:           1
//   linear:             max(0, (T - step) / max(1, T - W))
//   cosine:             max(0, 0.5 * (1 + cos(pi * progress))),
//                       progress = (step - W) / max(1, T - W)
//
// and the rate is:
//
//   step < W:   base_lr * multiplier                       (0 -> base_lr)
//   otherwise:  min_lr + (base_lr - min_lr) * multiplier   (base_lr -> min_lr)
//
// The floor applies to the decay phase only, so warmup starts from 0 and
// the rate is continuous at step W. With min_lr = 0 this is HF's value to
// the last bit. Note what HF does and we keep: with W > 0, step 0 runs at
// lr 0 (its update changes nothing but the moments). Past the end
// (step >= T) the formulas continue unchanged, as HF's do: linear stays at
// min_lr, and cosine climbs back up (progress > 1); a trainer running T
// steps never asks for those.
#include <cstdint>
#include <string>

namespace lt::optim {

struct ScheduleOptions {
  std::string name = "constant";  // constant | linear | cosine  (sched.name)
  int64_t warmup_steps = 0;       // sched.warmup_steps, <= total_steps
  int64_t total_steps = 1;        // the run's optimizer steps (train.steps), >= 1
  double base_lr = 1e-3;          // optim.lr
  double min_lr = 0.0;            // sched.min_lr, in [0, base_lr]
};

// Throws lt::Error naming the offending config key.
void validate(const ScheduleOptions& options);

// The learning rate for 0-based optimizer step `step` (>= 0).
double lr_at(const ScheduleOptions& options, int64_t step);

}  // namespace lt::optim
