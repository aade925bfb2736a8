#pragma once
// Exact-match accuracy on math word problems (`lazytrain eval --task math`,
// and what a run logs as eval_accuracy with data.eval_task: math): greedy
// decoding of each row's prompt, the final answer extracted from the output
// and from the row's reference (data/math_answer.h), and compared.
#include <functional>
#include <string>
#include <vector>

#include "data/prompt_rows.h"
#include "data/tokenizer.h"
#include "models/causal_lm.h"
#include "train/generation.h"

namespace lt::train {

struct MathEvalRow {
  int64_t line = 0;
  std::string prompt;     // the prompt's text, as rendered (template included)
  std::string output;     // the model's text
  std::string predicted;  // normalized answer extracted from the output; empty: none
  std::string reference;  // normalized answer of the reference
  bool correct = false;
  FinishReason finish = FinishReason::kLength;
};

struct MathEvalResult {
  double accuracy = 0;  // correct / n; 0 when n is 0
  int64_t n = 0;        // rows scored (those with a reference)
  int64_t correct = 0;
  int64_t without_reference = 0;  // rows left out: no reference field, or no answer in it
  int64_t new_tokens = 0;
  double seconds = 0;             // generation's wall time
  std::vector<MathEvalRow> rows;  // the scored rows, in row order
};

// `options` gives the length limit, batch size, EOS ids and stop strings;
// its sampling is replaced by greedy decoding. `on_scored_row`, when
// given, gets each scored row in row order as soon as it and the rows
// before it are answered (eval --out writes them as they come); when
// generation throws (a stop), the rows answered past the first unanswered
// one follow, in row order, before the exception goes on.
MathEvalResult evaluate_math(const models::CausalLM& model, const data::Tokenizer& tokenizer,
                             const std::vector<data::PromptRow>& rows, GenerationOptions options,
                             const std::function<void(const MathEvalRow&)>& on_scored_row = {});

}  // namespace lt::train
