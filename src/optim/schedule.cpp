#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace lt::optim {

void validate(const ScheduleOptions& o) {
  LT_CHECK(o.name == "constant" || o.name == "linear" || o.name == "cosine",
           "sched.name must be constant, linear or cosine, got '", o.name, "'");
  LT_CHECK(o.total_steps >= 1, "sched: the total steps (train.steps) must be >= 1, got ",
           o.total_steps);
  LT_CHECK(o.warmup_steps >= 0, "sched.warmup_steps must be >= 0, got ", o.warmup_steps);
  LT_CHECK(o.warmup_steps <= o.total_steps, "sched.warmup_steps (", o.warmup_steps,
           ") must not exceed the total steps (train.steps = ", o.total_steps, ")");
  LT_CHECK(std::isfinite(o.base_lr) && o.base_lr >= 0,
           "sched: the base rate (optim.lr) must be a finite number >= 0, got ", o.base_lr);
  LT_CHECK(std::isfinite(o.min_lr) && o.min_lr >= 0 && o.min_lr <= o.base_lr,
           "sched.min_lr must be in [0, optim.lr = ", o.base_lr, "], got ", o.min_lr);
}

double lr_at(const ScheduleOptions& o, int64_t step) {
  validate(o);
  LT_CHECK(step >= 0, "lr_at: the optimizer step must be >= 0, got ", step);
  const double s = static_cast<double>(step);
  const double warmup = static_cast<double>(o.warmup_steps);
  const double total = static_cast<double>(o.total_steps);
  if (step < o.warmup_steps) return o.base_lr * (s / std::max(1.0, warmup));

  double multiplier = 1.0;  // constant
  if (o.name == "linear") {
    multiplier = std::max(0.0, (total - s) / std::max(1.0, total - warmup));
  } else if (o.name == "cosine") {
    const double progress = (s - warmup) / std::max(1.0, total - warmup);
    multiplier = std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
  }
  return o.min_lr + (o.base_lr - o.min_lr) * multiplier;
}

}  // namespace lt::optim
