// ZenFlow's rules (exec/zenflow_policy.h): the column choice against a
// brute-force top-k, the auto window rule on hand-made masses and on
// masses taken from hand-made gradients, and the options' checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/random.h"
#include "exec/zenflow_policy.h"
#include "ops/columns.h"
#include "support/errors.h"

namespace lt::exec {
namespace {

// Brute force: k times, take the largest remaining score (lowest index on
// ties), then sort the chosen indices.
std::vector<int32_t> brute_force_top(std::vector<float> scores, int64_t k) {
  std::vector<int32_t> out;
  std::vector<bool> taken(scores.size(), false);
  for (int64_t n = 0; n < k; ++n) {
    int best = -1;
    for (size_t i = 0; i < scores.size(); ++i) {
      if (taken[i]) continue;
      if (best < 0 || scores[i] > scores[static_cast<size_t>(best)]) best = static_cast<int>(i);
    }
    taken[static_cast<size_t>(best)] = true;
    out.push_back(best);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ZenFlowPolicy, TopColumnsEqualsBruteForce) {
  Generator gen(21);
  for (int trial = 0; trial < 200; ++trial) {
    const auto n = static_cast<int64_t>(1 + gen.below(64));
    std::vector<float> scores(static_cast<size_t>(n));
    // Few distinct values, so ties are common.
    for (auto& s : scores) s = static_cast<float>(gen.below(trial % 2 ? 5 : 1000));
    const auto k = static_cast<int64_t>(gen.below(static_cast<uint64_t>(n) + 1));
    EXPECT_EQ(top_columns(scores, k), brute_force_top(scores, k)) << "trial " << trial;
  }
}

TEST(ZenFlowPolicy, SelectedCountIsTheCeilingWithinOneAndAll) {
  EXPECT_EQ(selected_count(100, 0.1), 10);
  EXPECT_EQ(selected_count(101, 0.1), 11);
  EXPECT_EQ(selected_count(5, 0.01), 1);
  EXPECT_EQ(selected_count(7, 1.0), 7);
}

TEST(ZenFlowPolicy, WindowEndsWhenNinetyNinePercentOfWeightsHaveMoreUnselectedMass) {
  std::vector<ColumnMass> masses(100, ColumnMass{1.0, 2.0});
  EXPECT_TRUE(window_should_end(masses));
  masses[0] = {2.0, 1.0};  // 99 of 100
  EXPECT_TRUE(window_should_end(masses));
  masses[1] = {2.0, 2.0};  // equal is not more: 98 of 100
  EXPECT_FALSE(window_should_end(masses));
  EXPECT_FALSE(window_should_end({}));
  EXPECT_FALSE(window_should_end({{1.0, 0.5}}));
  EXPECT_TRUE(window_should_end({{0.5, 1.0}}));
}

// Hand-made gradients: one weight per case whose selected columns carry a
// known L1 mass per step and whose other columns carry another; the window
// rule, fed the masses the column sums give, ends the window on the first
// step where the accumulated unselected mass passes the selected.
TEST(ZenFlowPolicy, WindowRuleOnHandMadeGradients) {
  const std::vector<int32_t> selected = {1, 3};
  // Per step: selected columns hold 5 per row, the other three columns 1
  // per row (2 rows): selected mass 20, unselected 6 per step.
  const std::vector<float> step_gradient = {1,  5, 1,  5,  1,  //
                                            -1, 5, -1, -5, 1};
  std::vector<float> accumulated(10, 0.0f);
  int ended_at = -1;
  for (int step = 1; step <= 10 && ended_at < 0; ++step) {
    for (size_t i = 0; i < accumulated.size(); ++i) {
      const bool is_selected = i % 5 == 1 || i % 5 == 3;
      // The device zeroes its columns every step; the others accumulate.
      accumulated[i] = is_selected ? step_gradient[i] : accumulated[i] + step_gradient[i];
    }
    const std::vector<float> sums =
        ops::column_abs_sums(Tensor::from_vector(accumulated, {2, 5})).to_vector<float>();
    ColumnMass m;
    for (int32_t c : selected) m.selected += sums[static_cast<size_t>(c)];
    for (float s : sums) m.unselected += s;
    m.unselected -= m.selected;
    if (window_should_end({m})) ended_at = step;
  }
  // Unselected mass after n steps: 6n (signs agree per column); selected:
  // 20. It first exceeds at n = 4.
  EXPECT_EQ(ended_at, 4);
}

TEST(ZenFlowPolicy, SelectIntervalInStepsAndEpochs) {
  ZenFlowOptions o;
  o.select_strategy = SelectStrategy::Step;
  EXPECT_EQ(select_interval_steps(o), 100);
  o.select_interval = 8;
  EXPECT_EQ(select_interval_steps(o), 8);
  o.select_strategy = SelectStrategy::Epoch;
  o.select_interval = 0;
  o.steps_per_epoch = 30;
  EXPECT_EQ(select_interval_steps(o), 30);
  o.select_interval = 2;
  EXPECT_EQ(select_interval_steps(o), 60);
  o.select_strategy = SelectStrategy::Auto;
  EXPECT_EQ(select_interval_steps(o), 60);
  o.steps_per_epoch = 0;
  EXPECT_EQ(select_interval_steps(o), 2);
}

TEST(ZenFlowPolicy, BadOptionsAreRefusedNamingTheKey) {
  auto message = [](const ZenFlowOptions& o) { return testing::error_of([&] { validate(o); }); };
  ZenFlowOptions o;
  EXPECT_EQ(message(o), "<no error>");
  o.topk_ratio = 0;
  EXPECT_NE(message(o).find("config key 'exec.zenflow.topk_ratio': must be in (0, 1], got 0"),
            std::string::npos);
  o.topk_ratio = 1.5;
  EXPECT_NE(message(o).find("exec.zenflow.topk_ratio"), std::string::npos);
  o = ZenFlowOptions{};
  o.select_strategy = SelectStrategy::Step;
  o.select_interval = 2;
  o.update_interval = 4;
  EXPECT_NE(message(o).find("config key 'exec.zenflow.select_interval' (2) must be at least "
                            "exec.zenflow.update_interval (4)"),
            std::string::npos);
  o.update_interval = 2;
  EXPECT_EQ(message(o), "<no error>");
  EXPECT_NE(testing::error_of([] {
              parse_select_strategy("weekly", "exec.zenflow.select_strategy");
            }).find("exec.zenflow.select_strategy must be auto, step or epoch"),
            std::string::npos);
}

}  // namespace
}  // namespace lt::exec
