#pragma once
// How a run with data.eval_task math ends: the held-out exact-match accuracy
// before its first step and at its last evaluation, and a few held-out
// problems with the model's greedy answers. This is what shows that the
// demo's minute of training taught its model something.
#include <cstdint>
#include <optional>
#include <string>

#include "train/math_eval.h"

namespace lt::train {

struct MathEvalAt {
  int64_t step = 0;  // optimizer steps done when measured; 0 = before training
  MathEvalResult result;
};

// One line, e.g. "held-out accuracy (exact match, 200 problems): 0.0% (0)
// before training -> 97.5% (195) after 600 steps". Without `before` (a
// resumed run) only the second half, from "at step". When the run ended
// past `last` (`steps_done`: a stop during its last evaluation), the line
// says whose score it is.
std::string math_accuracy_line(const std::optional<MathEvalAt>& before, const MathEvalAt& last,
                               int64_t steps_done = 0);

// The first `problems` scored rows of `last`, each as
//   <prompt, without its trailing newlines>
//     -> <the model's output>  (right|wrong, the answer is <reference>)
std::string math_answers_text(const MathEvalAt& last, int problems);

}  // namespace lt::train
