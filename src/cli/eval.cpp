// `lazytrain eval --model DIR --data FILE [--format F] [--template T]
//  [--tokenizer PATH] [--seq-len N] [--batch-size N] [--json]`
#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <memory>

#include "cli/commands.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "exec/evaluate.h"
#include "io/hf_model.h"

namespace lt::cli {

namespace {

struct EvalArgs {
  std::string model;
  std::string data;
  std::string format = "tokens";
  std::string template_name = "auto";
  std::string tokenizer;  // default: the model folder
  int64_t seq_len = 0;    // 0: whole rows
  int64_t batch_size = 8;
  bool json = false;
};

// Every next token of {"input_ids": [...]} rows (a "labels" field is not
// read), cut at --seq-len when given.
exec::EvalResult eval_token_rows(const models::CausalLM& model, const EvalArgs& args,
                                 const std::function<void(int64_t, int64_t)>& progress,
                                 int64_t* rows) {
  const auto token_rows = data::read_token_rows(args.data, model.config().vocab_size);
  *rows = static_cast<int64_t>(token_rows.size());
  if (args.seq_len == 0) return exec::evaluate_loss(model, token_rows, args.batch_size, progress);
  std::vector<data::Sample> samples;
  samples.reserve(token_rows.size());
  for (const auto& row : token_rows) samples.push_back({row, row});
  return exec::evaluate_samples(model, samples, args.batch_size, args.seq_len, progress);
}

// A dataset as `train` reads it (data.format, data.template): the response
// tokens only, the prompt being context, as the eval during training counts.
exec::EvalResult eval_dataset(const models::CausalLM& model, const EvalArgs& args,
                              const std::function<void(int64_t, int64_t)>& progress,
                              int64_t* rows) {
  const std::string tokenizer_path = args.tokenizer.empty() ? args.model : args.tokenizer;
  const data::Tokenizer tokenizer = data::load_tokenizer_for(
      tokenizer_path, "eval --format " + args.format,
      args.tokenizer.empty() ? "--model (--tokenizer is unset)" : "--tokenizer");
  data::DatasetOptions options;
  options.format = args.format;
  options.template_name = args.template_name;
  options.tokenizer_path = tokenizer_path;
  data::DatasetReport report;
  const auto samples = data::load_dataset(args.data, &tokenizer, options, &report);
  data::check_ids_in_vocab(samples, model.config().vocab_size, args.data);
  *rows = static_cast<int64_t>(samples.size());
  if (report.skipped > 0)
    fmt::print(stderr, "eval: {} of {} rows of {} skipped (first: {})\n", report.skipped,
               report.rows, args.data, report.problems.empty() ? "" : report.problems.front());
  return exec::evaluate_samples(
      model, samples, args.batch_size,
      args.seq_len > 0 ? args.seq_len : std::numeric_limits<int64_t>::max(), progress);
}

void run_eval(const EvalArgs& args) {
  models::CausalLM model = io::load_hf_model(args.model, DType::F32);
  const bool show_progress = !args.json && isatty(STDERR_FILENO);
  auto progress = [&](int64_t done, int64_t total) {
    if (show_progress) fmt::print(stderr, "\reval: {}/{} rows", done, total);
  };
  int64_t rows = 0;
  const exec::EvalResult result = args.format == "tokens"
                                      ? eval_token_rows(model, args, progress, &rows)
                                      : eval_dataset(model, args, progress, &rows);
  if (show_progress) fmt::print(stderr, "\n");
  if (args.json) {
    nlohmann::json j = {{"loss", result.loss}, {"tokens", result.tokens}, {"rows", rows}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("loss {:.6f} over {} predicted tokens ({} rows)\n", result.loss, result.tokens,
               rows);
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand("eval", "Mean next-token cross-entropy of a model over a dataset");
  cmd->add_option("--model", args->model, "Hugging Face model folder")->required();
  cmd->add_option("--data", args->data, "JSONL (or JSON) dataset")->required();
  cmd->add_option("--format", args->format,
                  "tokens ({\"input_ids\": [...]}, every next token predicted) or a text "
                  "format train reads (auto, alpaca, query_response, sharegpt, text: the "
                  "response tokens predicted, with train's default data settings)")
      ->capture_default_str();
  cmd->add_option("--template", args->template_name, "chat template, as data.template")
      ->capture_default_str();
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json or its folder (default: the model folder)");
  cmd->add_option("--seq-len", args->seq_len,
                  "tokens per row at most, as train.seq_len (default: whole rows)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch-size", args->batch_size, "Rows per forward pass")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json,
                "Print one JSON line: {\"loss\": ..., \"tokens\": ..., \"rows\": ...}");
  cmd->callback([args] { run_eval(*args); });
}

}  // namespace lt::cli
