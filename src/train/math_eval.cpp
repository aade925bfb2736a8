#include "train/math_eval.h"

#include <chrono>

#include "data/math_answer.h"

namespace lt::train {

MathEvalResult evaluate_math(const models::CausalLM& model, const data::Tokenizer& tokenizer,
                             const std::vector<data::PromptRow>& rows, GenerationOptions options,
                             const std::function<void(const MathEvalRow&)>& on_scored_row) {
  MathEvalResult result;
  options.sampling = SamplingOptions{};  // greedy: the score must not depend on a seed
  options.tokenizer = &tokenizer;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<const data::PromptRow*> scored;
  std::vector<std::string> references;
  for (const data::PromptRow& row : rows) {
    std::string reference = row.reference ? data::reference_answer(*row.reference) : "";
    if (reference.empty()) {
      ++result.without_reference;
      continue;
    }
    prompts.push_back(row.ids);
    scored.push_back(&row);
    references.push_back(std::move(reference));
  }
  std::vector<MathEvalRow> answered(prompts.size());
  RowsInOrder in_order(prompts.size(), [&](int64_t i) {
    if (on_scored_row) on_scored_row(answered[static_cast<size_t>(i)]);
  });
  options.on_row_done = [&](int64_t i, const Generation& made) {
    MathEvalRow& row = answered[static_cast<size_t>(i)];
    row.line = scored[i]->line;
    const std::vector<uint32_t> ids(scored[i]->ids.begin(), scored[i]->ids.end());
    row.prompt = tokenizer.decode(ids);
    row.output = made.text;
    row.predicted = data::predicted_answer(row.output);
    row.reference = references[i];
    row.correct = data::answers_match(row.predicted, row.reference);
    row.finish = made.finish;
    in_order.done(i);
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<Generation> out;
  try {
    out = generate(model, prompts, options);
  } catch (...) {
    in_order.flush_done();  // a stop or an error: every answer made is handed on
    throw;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < out.size(); ++i) {
    result.correct += answered[i].correct;
    result.new_tokens += static_cast<int64_t>(out[i].tokens.size());
    result.rows.push_back(std::move(answered[i]));
  }
  result.n = static_cast<int64_t>(result.rows.size());
  result.accuracy = result.n > 0 ? static_cast<double>(result.correct) / result.n : 0.0;
  return result;
}

}  // namespace lt::train
