// The lr of every step in metrics.jsonl, for each schedule with warmup and a
// min_lr floor, against the Hugging Face formulas written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

// transformers' get_{constant,linear,cosine}_schedule_with_warmup lambdas
// (num_cycles 0.5), 0-based step = the optimizer step the rate is used for;
// the min_lr floor scales the decay phase only (optim/schedule.h).
double hf_lr(const std::string& name, int64_t step, int64_t warmup, int64_t total, double base,
             double min_lr) {
  if (step < warmup) {
    return base * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
  }
  double mult = 1.0;
  const double decay_steps = static_cast<double>(std::max<int64_t>(1, total - warmup));
  if (name == "linear") {
    mult = std::max(0.0, static_cast<double>(total - step) / decay_steps);
  } else if (name == "cosine") {
    const double progress = static_cast<double>(step - warmup) / decay_steps;
    mult = std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
  }
  return min_lr + (base - min_lr) * mult;
}

struct Case {
  std::string name;
  int64_t warmup;
  double min_lr;
};

TEST(Schedules, MetricsLrFollowsTheHuggingFaceFormulas) {
  TempDir tmp("sched");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 3);
  const int64_t steps = 10;
  const double base = 2e-3;
  for (const Case& c : {Case{"constant", 3, 0.0}, Case{"linear", 3, 2e-4}, Case{"linear", 0, 0.0},
                        Case{"cosine", 3, 2e-4}, Case{"cosine", 4, 0.0}}) {
    SCOPED_TRACE(c.name + " warmup " + std::to_string(c.warmup) + " min_lr " +
                 std::to_string(c.min_lr));
    const fs::path out = tmp / (c.name + std::to_string(c.warmup));
    TrainConfig config =
        fixture_config(fixture("llama"), tmp / "data.jsonl", out,
                       {"train.steps=" + std::to_string(steps), "optim.lr=" + std::to_string(base),
                        "sched.name=" + c.name, "sched.warmup_steps=" + std::to_string(c.warmup),
                        "sched.min_lr=" + std::to_string(c.min_lr)});
    train_quietly(config);
    auto metrics = read_metrics(out);
    ASSERT_EQ(metrics.size(), static_cast<size_t>(steps));
    for (int64_t s = 0; s < steps; ++s) {
      const double expected = hf_lr(c.name, s, c.warmup, steps, base, c.min_lr);
      EXPECT_NEAR(metrics[s].at("lr").get<double>(), expected, 1e-15) << "step " << s;
    }
    // Shape checks that do not depend on the formula above.
    EXPECT_EQ(metrics[0].at("lr").get<double>(), c.warmup > 0 ? 0.0 : base);
    EXPECT_DOUBLE_EQ(metrics[c.warmup].at("lr").get<double>(), base);
    if (c.name != "constant") {
      EXPECT_LT(metrics[steps - 1].at("lr").get<double>(), base);
      EXPECT_GE(metrics[steps - 1].at("lr").get<double>(), c.min_lr);
    }
  }
}

}  // namespace
}  // namespace lt::train::testing
