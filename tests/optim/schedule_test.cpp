// LR schedules against Hugging Face transformers' lr_lambda functions,
// transcribed here from transformers/optimization.py, and against values
// computed by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <string>

#include "core/error.h"
#include "optim/schedule.h"

namespace lt::optim {
namespace {

// _get_{constant,linear,cosine}_schedule_with_warmup_lr_lambda, num_cycles=0.5.
double hf_lambda(const std::string& name, int64_t current_step, int64_t num_warmup_steps,
                 int64_t num_training_steps) {
  if (current_step < num_warmup_steps)
    return double(current_step) / double(std::max<int64_t>(1, num_warmup_steps));
  if (name == "constant") return 1.0;
  if (name == "linear") {
    return std::max(0.0, double(num_training_steps - current_step) /
                             double(std::max<int64_t>(1, num_training_steps - num_warmup_steps)));
  }
  const double num_cycles = 0.5;
  const double progress = double(current_step - num_warmup_steps) /
                          double(std::max<int64_t>(1, num_training_steps - num_warmup_steps));
  return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * num_cycles * 2.0 * progress)));
}

ScheduleOptions options(const std::string& name, int64_t warmup, int64_t total, double base,
                        double min_lr = 0.0) {
  return {.name = name,
          .warmup_steps = warmup,
          .total_steps = total,
          .base_lr = base,
          .min_lr = min_lr};
}

// With min_lr = 0, LambdaLR's base_lr * lambda(step), to the last bit, for
// every step of the run and some beyond it.
TEST(Schedule, EqualsHuggingFaceLambdaLRWithoutFloor) {
  for (const std::string name : {"constant", "linear", "cosine"}) {
    for (int64_t warmup : {0, 1, 7, 50}) {
      const ScheduleOptions o = options(name, warmup, 50, 3e-4);
      for (int64_t step = 0; step < 80; ++step) {
        EXPECT_EQ(lr_at(o, step), 3e-4 * hf_lambda(name, step, warmup, 50))
            << name << " warmup " << warmup << " step " << step;
      }
    }
  }
}

// With a floor: warmup as HF, then min_lr + (base - min_lr) * lambda.
TEST(Schedule, MinLrFloorsTheDecayPhaseOnly) {
  for (const std::string name : {"constant", "linear", "cosine"}) {
    const ScheduleOptions o = options(name, 10, 110, 1e-3, 1e-4);
    for (int64_t step = 0; step < 200; ++step) {
      const double lambda = hf_lambda(name, step, 10, 110);
      const double expected = step < 10 ? 1e-3 * lambda : 1e-4 + (1e-3 - 1e-4) * lambda;
      EXPECT_DOUBLE_EQ(lr_at(o, step), expected) << name << " step " << step;
    }
  }
}

// base 1e-3, warmup 10, total 110 (100 decay steps), by hand.
TEST(Schedule, HandComputedValues) {
  for (const std::string name : {"constant", "linear", "cosine"}) {
    const ScheduleOptions o = options(name, 10, 110, 1e-3);
    EXPECT_EQ(lr_at(o, 0), 0.0) << name;  // HF: step 0 runs at lr 0 when warming up
    EXPECT_DOUBLE_EQ(lr_at(o, 1), 1e-4) << name;
    EXPECT_DOUBLE_EQ(lr_at(o, 5), 5e-4) << name;
    EXPECT_DOUBLE_EQ(lr_at(o, 9), 9e-4) << name;
    EXPECT_DOUBLE_EQ(lr_at(o, 10), 1e-3) << name;  // warmup done: the full rate
  }
  const ScheduleOptions constant = options("constant", 10, 110, 1e-3, 1e-4);
  EXPECT_DOUBLE_EQ(lr_at(constant, 60), 1e-3);
  EXPECT_DOUBLE_EQ(lr_at(constant, 109), 1e-3);
  EXPECT_DOUBLE_EQ(lr_at(constant, 5000), 1e-3);  // min_lr plays no part

  const ScheduleOptions linear = options("linear", 10, 110, 1e-3);
  EXPECT_DOUBLE_EQ(lr_at(linear, 35), 0.75e-3);
  EXPECT_DOUBLE_EQ(lr_at(linear, 60), 0.5e-3);
  EXPECT_DOUBLE_EQ(lr_at(linear, 109), 1e-5);  // the last step of the run
  EXPECT_EQ(lr_at(linear, 110), 0.0);          // the end
  EXPECT_EQ(lr_at(linear, 150), 0.0);          // past it: clamped at 0
  const ScheduleOptions linear_floor = options("linear", 10, 110, 1e-3, 1e-4);
  EXPECT_DOUBLE_EQ(lr_at(linear_floor, 60), 1e-4 + 0.9e-3 * 0.5);
  EXPECT_DOUBLE_EQ(lr_at(linear_floor, 110), 1e-4);
  EXPECT_DOUBLE_EQ(lr_at(linear_floor, 150), 1e-4);
  EXPECT_DOUBLE_EQ(lr_at(linear_floor, 5), 5e-4);  // warmup still starts from 0

  const ScheduleOptions cosine = options("cosine", 10, 110, 1e-3);
  EXPECT_DOUBLE_EQ(lr_at(cosine, 35), 0.8535533905932737e-3);  // (1 + cos(pi/4)) / 2
  EXPECT_DOUBLE_EQ(lr_at(cosine, 60), 0.5e-3);                 // (1 + cos(pi/2)) / 2
  EXPECT_DOUBLE_EQ(lr_at(cosine, 85), 0.1464466094067262e-3);  // (1 + cos(3pi/4)) / 2
  EXPECT_NEAR(lr_at(cosine, 110), 0.0, 1e-20);                 // the end: cos(pi) = -1
  // Past the end HF's cosine climbs back (progress 1.5 -> 0.5): kept as is.
  EXPECT_NEAR(lr_at(cosine, 160), 0.5e-3, 1e-18);
  const ScheduleOptions cosine_floor = options("cosine", 10, 110, 1e-3, 2e-4);
  EXPECT_DOUBLE_EQ(lr_at(cosine_floor, 60), 2e-4 + 0.8e-3 * 0.5);
  EXPECT_DOUBLE_EQ(lr_at(cosine_floor, 110), 2e-4);
  EXPECT_DOUBLE_EQ(lr_at(cosine_floor, 0), 0.0);
}

TEST(Schedule, NoWarmupStartsAtTheFullRate) {
  EXPECT_DOUBLE_EQ(lr_at(options("linear", 0, 4, 1e-3), 0), 1e-3);
  EXPECT_DOUBLE_EQ(lr_at(options("linear", 0, 4, 1e-3), 1), 0.75e-3);
  EXPECT_DOUBLE_EQ(lr_at(options("cosine", 0, 4, 1e-3), 0), 1e-3);
  EXPECT_DOUBLE_EQ(lr_at(options("constant", 0, 4, 1e-3), 0), 1e-3);
}

TEST(Schedule, WarmupAsLongAsTheRun) {
  const ScheduleOptions o = options("cosine", 4, 4, 1e-3, 1e-4);
  EXPECT_DOUBLE_EQ(lr_at(o, 0), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(o, 3), 0.75e-3);
  EXPECT_DOUBLE_EQ(lr_at(o, 4), 1e-3);  // progress 0 / max(1, 0)
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Schedule, ValidationNamesTheField) {
  expect_error([] { validate(options("foo", 0, 10, 1e-3)); },
               "sched.name must be constant, linear or cosine, got 'foo'");
  expect_error([] { validate(options("linear", -1, 10, 1e-3)); },
               "sched.warmup_steps must be >= 0");
  expect_error([] { validate(options("linear", 11, 10, 1e-3)); },
               "sched.warmup_steps (11) must not exceed the total steps (train.steps = 10)");
  expect_error([] { validate(options("linear", 0, 0, 1e-3)); }, "train.steps");
  expect_error([] { validate(options("linear", 0, 10, -1e-3)); }, "optim.lr");
  expect_error([] { validate(options("linear", 0, 10, 1e-3, 2e-3)); }, "sched.min_lr must be in");
  expect_error([] { validate(options("linear", 0, 10, 1e-3, -1.0)); }, "sched.min_lr");
  expect_error([] { lr_at(options("linear", 0, 10, 1e-3), -1); }, "step must be >= 0");
  EXPECT_NO_THROW(validate(options("cosine", 10, 10, 1e-3, 1e-3)));
}

}  // namespace
}  // namespace lt::optim
