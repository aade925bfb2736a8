// The closing lines of a run with data.eval_task math, on results made by
// hand.
#include "train/math_report.h"

#include <gtest/gtest.h>

namespace lt::train {
namespace {

MathEvalAt scored(int64_t step, int64_t correct, int64_t n) {
  MathEvalAt at;
  at.step = step;
  at.result.n = n;
  at.result.correct = correct;
  at.result.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  return at;
}

TEST(MathReport, TheAccuracyLineSaysBeforeAndAfter) {
  EXPECT_EQ(math_accuracy_line(scored(0, 0, 200), scored(300, 125, 200)),
            "held-out accuracy (exact match, 200 problems): 0.0% (0) before training -> 62.5% "
            "(125) after 300 steps");
  EXPECT_EQ(math_accuracy_line(scored(0, 1, 3), scored(1, 2, 3)),
            "held-out accuracy (exact match, 3 problems): 33.3% (1) before training -> 66.7% (2) "
            "after 1 step");
  // A resumed run has no figure from before its first step.
  EXPECT_EQ(math_accuracy_line(std::nullopt, scored(40, 7, 8)),
            "held-out accuracy (exact match, 8 problems): 87.5% (7) at step 40");
  // A stop during the last evaluation: the score is step 20's, beside a
  // step-40 checkpoint (it read as the run's).
  EXPECT_EQ(math_accuracy_line(scored(0, 0, 200), scored(20, 9, 200), 40),
            "held-out accuracy (exact match, 200 problems): 0.0% (0) before training -> 4.5% (9) "
            "after 20 steps (the step-20 model's; the run ended at step 40 without evaluating "
            "that one)");
  EXPECT_EQ(math_accuracy_line(scored(0, 0, 200), scored(40, 9, 200), 40),
            "held-out accuracy (exact match, 200 problems): 0.0% (0) before training -> 4.5% (9) "
            "after 40 steps");
}

TEST(MathReport, AnswersShowPromptOutputAndVerdict) {
  MathEvalAt at = scored(300, 1, 2);
  MathEvalRow right, wrong;
  right.prompt = "Kim has 12 shells and gets 64 more. How many shells does Kim have now?\n";
  right.output = "#### 76";
  right.reference = "76";
  right.correct = true;
  wrong.prompt = "Dan has 22 eggs and gets 77 more. How many eggs does Dan have now?\n";
  wrong.output = "#### 89\n";
  wrong.reference = "99";
  at.result.rows = {right, wrong};
  EXPECT_EQ(math_answers_text(at, 3),
            "Kim has 12 shells and gets 64 more. How many shells does Kim have now?\n"
            "  -> #### 76  (right, the answer is 76)\n"
            "Dan has 22 eggs and gets 77 more. How many eggs does Dan have now?\n"
            "  -> #### 89  (wrong, the answer is 99)\n");
  EXPECT_EQ(math_answers_text(at, 1).find("Dan"), std::string::npos);
  EXPECT_EQ(math_answers_text(at, 0), "");
}

}  // namespace
}  // namespace lt::train
