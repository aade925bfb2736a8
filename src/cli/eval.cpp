// `lazytrain eval --model DIR --data FILE [--batch-size N] [--json]`
#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <memory>

#include "cli/commands.h"
#include "exec/evaluate.h"
#include "io/hf_model.h"

namespace lt::cli {

namespace {

struct EvalArgs {
  std::string model;
  std::string data;
  int64_t batch_size = 8;
  bool json = false;
};

void run_eval(const EvalArgs& args) {
  models::CausalLM model = io::load_hf_model(args.model, DType::F32);
  auto rows = data::read_token_rows(args.data, model.config().vocab_size);
  const bool show_progress = !args.json && isatty(STDERR_FILENO);
  auto progress = [&](int64_t done, int64_t total) {
    if (show_progress) fmt::print(stderr, "\reval: {}/{} rows", done, total);
  };
  exec::EvalResult result = exec::evaluate_loss(model, rows, args.batch_size, progress);
  if (show_progress) fmt::print(stderr, "\n");
  if (args.json) {
    nlohmann::json j = {{"loss", result.loss}, {"tokens", result.tokens}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("loss {:.6f} over {} predicted tokens ({} rows)\n", result.loss, result.tokens,
               rows.size());
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand("eval", "Mean next-token cross-entropy of a model over a dataset");
  cmd->add_option("--model", args->model, "Hugging Face model folder")->required();
  cmd->add_option("--data", args->data, "JSONL file, one {\"input_ids\": [...]} per line")
      ->required();
  cmd->add_option("--batch-size", args->batch_size, "Rows per forward pass")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "Print one JSON line: {\"loss\": ..., \"tokens\": ...}");
  cmd->callback([args] { run_eval(*args); });
}

}  // namespace lt::cli
