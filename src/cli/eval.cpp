// `lazytrain eval --model DIR --data FILE [--format F] [--template T]
//  [--prompt-field F] [--response-field F] [--tokenizer PATH] [--seq-len N] [--batch-size N]
//  [--json]`: the loss;
// `lazytrain eval --task math ... [--answer-field F] [--max-new-tokens N]
//  [--stop S ...] [--device D] [--device-memory-gb X] [--out FILE]`: exact-match accuracy.
#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/partial_file.h"
#include "cli/rows_stop.h"
#include "cli/shell_expanded_path.h"
#include "data/dataset.h"
#include "data/seq_len_cut.h"
#include "data/tokenizer.h"
#include "exec/evaluate.h"
#include "io/atomic_file.h"
#include "io/hf_model.h"
#include "io/weight_values.h"
#include "models/context_limit.h"
#include "train/generation_sampling.h"
#include "train/generation_setup.h"
#include "train/math_eval.h"
#include "train/trained_template.h"

namespace lt::cli {

namespace {

struct EvalArgs {
  std::string model;
  std::string data;
  std::string format = "auto";
  std::string template_name;  // empty: the one a checkpoint was trained with, else auto
  std::string tokenizer;      // default: the model folder
  // query_response; empty: the ones a checkpoint was trained with, else detected
  std::string prompt_field, response_field;
  int64_t seq_len = 0;  // 0: whole rows, in windows of the model's context
  int64_t batch_size = 8;
  bool json = false;
  // --task math
  std::string task = "loss";
  std::string answer_field;
  std::string out;
  std::string device = "auto";
  double device_memory_gb = 0;
  int64_t max_new_tokens = 512;
  std::vector<std::string> stop;
  // The --task math options given on the command line, by name.
  std::vector<std::string> math_options_given;
};

// What was read, and how rows were made to fit: printed with the loss.
struct EvalInput {
  std::vector<data::Sample> samples;
  int64_t rows = 0;
  std::string format, template_name, fields;  // as resolved; template and fields may be empty
  int64_t rows_cut = 0;       // rows cut short at --seq-len: their tokens past it are dropped
  int64_t rows_windowed = 0;  // rows split into windows of the model's context: none dropped
  int64_t cut_length = 0;     // --seq-len, or the model's context
  bool windows = false;       // without --seq-len: long rows are windowed, never cut
  int64_t rows_scored = 0;    // rows that keep a token to predict, cut or not
};

// {"input_ids": [...]} rows, every next token predicted (a "labels" field
// is not read).
void read_token_rows(const models::CausalLM& model, const EvalArgs& args, EvalInput* input) {
  auto rows = data::read_token_rows(args.data, model.config().vocab_size);
  input->rows = static_cast<int64_t>(rows.size());
  input->samples.reserve(rows.size());
  for (auto& row : rows) {
    std::vector<int32_t> labels = row;
    input->samples.push_back({std::move(row), std::move(labels), 0});
  }
}

// A dataset as `train` reads it (data.format, data.template): the response
// tokens only, the prompt being context, as the eval during training counts.
void read_dataset(const models::CausalLM& model, const EvalArgs& args, const std::string& format,
                  const std::string& template_name, const train::PromptFields& fields,
                  EvalInput* input) {
  const std::string tokenizer_path = args.tokenizer.empty() ? args.model : args.tokenizer;
  const data::Tokenizer tokenizer = data::load_tokenizer_for(
      tokenizer_path, "eval --format " + format,
      args.tokenizer.empty() ? "--model (--tokenizer is unset)" : "--tokenizer");
  const std::string warning = data::check_tokenizer_runs_model(
      tokenizer, model.config().vocab_size, models::model_config_file(args.model));
  if (!warning.empty()) fmt::print(stderr, "{}\n", warning);  // also under --json
  data::DatasetOptions options;
  options.format = format;
  options.template_name = template_name;
  options.prompt_field = fields.prompt;
  options.response_field = fields.response;
  options.fields_where_present = fields.trained();
  options.settings = data::kCommandOptions;
  options.tokenizer_path = tokenizer_path;
  data::DatasetReport report;
  input->samples = data::load_dataset(args.data, &tokenizer, options, &report);
  data::check_ids_in_vocab(input->samples, model.config().vocab_size, args.data);
  input->rows = static_cast<int64_t>(input->samples.size());
  input->template_name = report.template_name;
  if (!report.prompt_field.empty())
    input->fields = report.prompt_field + " -> " + report.response_field;
  if (report.skipped > 0)
    fmt::print(stderr, "eval: {} of {} rows of {} skipped (first: {})\n", report.skipped,
               report.rows, args.data, report.problems.empty() ? "" : report.problems.front());
}

// Makes the rows fit as train does: cut at --seq-len (as train.seq_len);
// without it, a row longer than the model's context is evaluated in
// windows of it, which lose no token, so it is counted as windowed, not
// cut. Says how many rows were cut or windowed, how many cut rows keep no
// token to predict, and refuses data of which no row keeps one, naming the
// file.
// `context_key`: the config.json key that sets `context`.
void fit_rows(const EvalArgs& args, int64_t context, const char* context_key, EvalInput* input) {
  input->cut_length = args.seq_len > 0 ? args.seq_len : context;
  input->windows = args.seq_len == 0;
  // Windows overlap by a token, so a row keeps every token it predicts.
  const data::SeqLenCut cut = data::count_seq_len_cut(
      input->samples, input->windows ? std::numeric_limits<int64_t>::max() : args.seq_len);
  input->rows_scored = cut.rows_with_target;
  if (input->rows_scored == 0) {
    if (cut.rows_cut > 0) {
      fail(args.data, ": no row keeps a token to predict within --seq-len ", args.seq_len, " (",
           cut.rows_cut, " of ", cut.rows, " rows are longer and were cut; the longest has ",
           cut.longest, " tokens): nothing to evaluate; raise --seq-len");
    }
    fail(args.data, ": none of its ", cut.rows,
         " rows has a token to predict (a row needs 2 tokens, and a response token in a format "
         "with a prompt): nothing to evaluate");
  }
  if (input->windows) {
    input->samples =
        exec::split_into_windows(std::move(input->samples), context, &input->rows_windowed);
    if (input->rows_windowed > 0 && !args.json) {
      fmt::print(stderr,
                 "eval: {} of {} rows of {} are longer than the model's context ({} {}) and are "
                 "evaluated in windows of that many tokens, each starting on the last token of "
                 "the one before: no token is lost\n",
                 input->rows_windowed, cut.rows, args.data, context_key, context);
    }
    return;
  }
  input->rows_cut = cut.rows_cut;
  if (input->rows_cut == 0 || args.json) return;
  // As train's line for train.seq_len (train/run_setup.cpp).
  std::string line =
      fmt::format("eval: {} of {} rows of {} are longer than --seq-len {} and were cut",
                  cut.rows_cut, cut.rows, args.data, args.seq_len);
  if (cut.cut_without_target > 0) {
    line += fmt::format(
        "; {} of them keep no scored token (all of theirs lie past token {}) and are left out: "
        "raise --seq-len (the longest row has {} tokens)",
        cut.cut_without_target, args.seq_len, cut.longest);
  } else {
    line += fmt::format(" (their tokens past {} are not scored)", args.seq_len);
  }
  fmt::print(stderr, "{}\n", line);
}

// Here rather than as CLI11 checks, whose message for 0 was a range
// running to 1.8e308 spelled out in 300 digits.
void check_sizes(const EvalArgs& args) {
  if (args.batch_size < 1)
    fail("--batch-size must be a whole number of rows, at least 1; got ", args.batch_size);
  if (args.seq_len < 0 || args.seq_len == 1) {
    fail("--seq-len must be 0 (whole rows, in windows of the model's context) or at least 2 ",
         "tokens; got ", args.seq_len);
  }
}

// The options only --task math reads. The loss refuses them: it would run
// without them, silently, and --out would write no file.
constexpr std::array<const char*, 6> kMathOptions = {
    "--answer-field", "--out", "--max-new-tokens", "--stop", "--device", "--device-memory-gb"};

// What a kMathOptions option does, for that refusal.
std::string math_option_use(const std::string& name) {
  if (name == "--answer-field") return "names the reference answer of --task math";
  if (name == "--out") {
    return "writes --task math's answers row by row (the loss has no rows to write; its line, "
           "with --json, can be redirected to a file)";
  }
  if (name == "--max-new-tokens") return "bounds the answers of --task math";
  if (name == "--stop") return "ends the answers of --task math";
  return "places the model --task math generates with (the loss runs on the CPU in f32: "
         "--device cpu and auto are accepted)";
}

// One row --task math writes to --out.
nlohmann::json answer_row(const train::MathEvalRow& row) {
  return {{"line", row.line},
          {"prompt", row.prompt},
          {"output", row.output},
          {"extracted", row.predicted},
          {"reference", row.reference},
          {"correct", row.correct},
          {"finish", train::finish_reason_name(row.finish)}};
}

// --out replaces only what an earlier --task math wrote: a file whose first
// line is one of its rows (or an empty file). Anything else, the --data file
// above all, would be lost to the answers, so it is refused before the model
// loads.
void check_out_replaces_only_answers(const EvalArgs& args) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(args.out, ec)) return;
  if (fs::equivalent(args.out, args.data, ec)) {
    fail("--out ", args.out, " is the --data file: the answers would replace the rows they ",
         "answer; give --out another file");
  }
  std::ifstream in(args.out);
  std::string first;
  std::getline(in, first);
  if (!in && !in.eof()) fail("--out ", args.out, ": cannot be read to check what it holds");
  if (first.empty() && in.peek() == std::ifstream::traits_type::eof()) return;
  const nlohmann::json row = nlohmann::json::parse(first, nullptr, false);
  // It has every key answer_row writes.
  const nlohmann::json keys = answer_row({});
  const bool answers =
      row.is_object() && std::all_of(keys.items().begin(), keys.items().end(),
                                     [&](const auto& k) { return row.contains(k.key()); });
  if (!answers) {
    fail("--out ", args.out, " exists and is not an earlier eval --task math answers file ",
         "(its first line is not one of its rows): it is kept; give --out a new file, or remove ",
         "it first");
  }
}

// --task math: greedy answers to each row's prompt, scored by exact match.
void run_math(const EvalArgs& args) {
  if (args.batch_size < 1)
    fail("--batch-size must be a whole number of rows, at least 1; got ", args.batch_size);
  if (args.seq_len != 0) fail("--seq-len is for the loss; --task math reads whole prompts");
  if (args.max_new_tokens < 1) {
    fail("--max-new-tokens must be at least 1 (answer tokens per row at most); got ",
         args.max_new_tokens);
  }
  train::check_stop_strings(args.stop);  // before the model loads
  if (!args.out.empty()) {               // before the answers are made
    io::check_can_write(args.out, "--out");
    check_out_replaces_only_answers(args);
  }
  check_model_folder(args.model, "--model ");
  train::GenerationModel g = train::load_generation_model(args.model, args.tokenizer, args.device,
                                                          true, "eval --task math");
  if (const std::string note = train::eos_outside_vocabulary_note(g, "eval"); !note.empty())
    fmt::print(stderr, "{}\n", note);
  const train::PromptTemplate chosen =
      train::prompt_template(args.model, args.template_name, "eval");
  const train::PromptFields fields =
      train::prompt_fields(args.model, {args.prompt_field, args.response_field, ""}, true, "eval");
  data::PromptOptions options;
  options.format = args.format;
  options.template_name = chosen.name;
  options.tokenizer_path = g.tokenizer_path;
  options.prompt_field = fields.prompt;
  options.response_field = fields.response;
  options.fields_where_present = fields.trained();
  options.answer_field = args.answer_field;
  options.settings = data::kCommandOptions;
  data::PromptSet prompts = data::load_prompts(args.data, &*g.tokenizer, options);
  const train::PromptsPastContext past_context =
      train::leave_out_prompts_past_context(prompts, args.data, g.model.config());
  const std::string skipped_line =
      train::skipped_rows_line("eval", prompts, past_context, args.data);
  if (!skipped_line.empty()) fmt::print(stderr, "{}\n", skipped_line);
  // Not answered, so not in the accuracy: said with it.
  const int64_t skipped = prompts.skipped + past_context.rows;
  train::check_prompts_have_answers(prompts, args.data, "--answer-field");
  // Also under --json (on stderr): which layout the prompts took matters.
  if (!chosen.note.empty() && !prompts.template_name.empty())
    fmt::print(stderr, "{}\n", chosen.note);
  if (fields.trained() && prompts.prompt_field == fields.prompt)
    fmt::print(stderr, "{}\n", fields.note);
  train::check_prompts_fit(prompts, args.data, g.model.config(), args.model);
  train::place_generation_model(g, args.device_memory_gb, prompts, args.batch_size,
                                args.max_new_tokens);
  if (!args.json) {
    fmt::print(stderr, "eval: task math on {} rows of {} ({}{}, answers from {}), on {}\n",
               prompts.rows.size(), args.data, prompts.format,
               prompts.template_name.empty() ? "" : ", template " + prompts.template_name,
               prompts.reference_source(), train::generation_device_text(g));
  }
  train::GenerationOptions generation;
  generation.max_new_tokens = args.max_new_tokens;
  generation.batch_size = args.batch_size;
  generation.stop_strings = args.stop;
  generation.eos_ids = g.eos_ids;
  generation.streamed = g.streamed.get();
  if (prompts.turn_end && std::find(generation.eos_ids.begin(), generation.eos_ids.end(),
                                    *prompts.turn_end) == generation.eos_ids.end()) {
    generation.eos_ids.push_back(*prompts.turn_end);
  }
  const bool show_progress = !args.json && isatty(STDERR_FILENO);
  // Note [Stopping eval and generate]: with --out, the answers go to its
  // .partial file as they come, and a signal is a request to keep them.
  // Without it there is nothing to keep: a signal ends the command at once.
  PartialFile answers(args.out, "--out");
  std::optional<RowsStopRequest> stop;
  if (!args.out.empty()) stop.emplace();
  generation.on_batch_done = [&](int64_t done, int64_t total) {
    if (show_progress) fmt::print(stderr, "\reval: {}/{} rows answered", done, total);
    if (stop && done < total) stop->throw_if_requested();  // the last batch ends the run anyway
  };
  const auto write_row = [&](const train::MathEvalRow& row) {
    answers.add(answer_row(row).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  };
  train::MathEvalResult result;
  try {
    result = train::evaluate_math(g.model, *g.tokenizer, prompts.rows, generation, write_row);
  } catch (const RowsStopped& stopped) {
    const std::string kept = answers.kept();
    say_on_stderr(fmt::format("{}eval: stopped by signal {} after the batch in flight; {}",
                              show_progress ? "\n" : "", stopped.signal,
                              kept.empty()
                                  ? "no row was answered yet"
                                  : "kept " + kept +
                                        " (each with its line; in row order up to the first row "
                                        "not answered)"));
    end_by_signal(stopped.signal);
  } catch (const std::exception&) {
    if (const std::string kept = answers.kept(); !kept.empty())
      say_on_stderr(fmt::format("{}eval: an error stopped it; kept {}, answered before it",
                                show_progress ? "\n" : "", kept));
    throw;
  }
  if (show_progress) fmt::print(stderr, "\n");
  if (result.without_reference > 0) {
    fmt::print(stderr, "eval: {} rows have no reference answer in {} and are not scored\n",
               result.without_reference, prompts.reference_source());
  }
  answers.commit();
  if (args.json) {
    nlohmann::json j = {{"task", "math"},
                        {"accuracy", result.accuracy},
                        {"n", result.n},
                        {"correct", result.correct},
                        {"skipped", skipped},
                        {"format", prompts.format},
                        {"new_tokens", result.new_tokens},
                        {"seconds", result.seconds}};
    if (!prompts.template_name.empty()) j["template"] = prompts.template_name;
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print(
        "accuracy {:.4f} ({} of {} rows exactly right{}); {} new tokens in {:.1f} s ({:.1f} "
        "tokens/s)\n",
        result.accuracy, result.correct, result.n,
        skipped > 0
            ? fmt::format("; {} skipped {} not answered", skipped, skipped == 1 ? "row" : "rows")
            : "",
        result.new_tokens, result.seconds,
        result.seconds > 0 ? result.new_tokens / result.seconds : 0.0);
  }
}

void run_eval(const EvalArgs& args) {
  if (args.task == "math") return run_math(args);
  if (args.task != "loss") fail("unknown --task \"", args.task, "\"; expected loss or math");
  if (!args.math_options_given.empty()) {
    const std::string& name = args.math_options_given.front();
    fail(name, " ", math_option_use(name), "; this is --task loss (the default), which scores ",
         "the rows' own tokens: give --task math, or leave ", name, " out");
  }
  check_sizes(args);
  check_model_folder(args.model, "--model ");
  EvalInput input;
  const train::PromptFields fields =
      train::prompt_fields(args.model, {args.prompt_field, args.response_field, ""}, true, "eval");
  data::DatasetOptions detect;
  detect.format = args.format;
  detect.prompt_field = fields.prompt;
  detect.response_field = fields.response;
  detect.fields_where_present = fields.trained();
  detect.settings = data::kCommandOptions;
  input.format = data::detect_format(args.data, detect);

  models::CausalLM model = io::load_hf_model(args.model, DType::F32);
  if (const std::string nan = io::non_finite_weights_warning(model, args.model); !nan.empty())
    fmt::print(stderr, "{}\n", nan);  // also under --json: the loss is NaN
  const int64_t context = model.config().exact_context();
  models::check_seq_len_fits(args.seq_len, "--seq-len", model.config(), args.model);
  if (!args.json) {
    fmt::print(stderr, "eval: reading {} as format {}{}\n", args.data, input.format,
               args.format == "auto" ? " (detected)" : "");
  }
  if (input.format == "tokens") {
    read_token_rows(model, args, &input);
  } else {
    const train::PromptTemplate chosen =
        train::prompt_template(args.model, args.template_name, "eval");
    read_dataset(model, args, input.format, chosen.name, fields, &input);
    // Also under --json (on stderr): which layout the rows took matters.
    if (!chosen.note.empty() && !input.template_name.empty())
      fmt::print(stderr, "{}\n", chosen.note);
    if (fields.trained() && input.fields.starts_with(fields.prompt + " -> "))
      fmt::print(stderr, "{}\n", fields.note);
    if (!args.json) {
      fmt::print(stderr, "eval: template {}{}\n",
                 input.template_name.empty() ? "none" : input.template_name,
                 input.fields.empty() ? "" : ", fields " + input.fields);
    }
  }

  fit_rows(args, context, model.config().exact_context_key(), &input);

  const bool show_progress = !args.json && isatty(STDERR_FILENO);
  auto progress = [&](int64_t done, int64_t total) {
    if (show_progress) fmt::print(stderr, "\reval: {}/{} rows", done, total);
  };
  const exec::EvalResult result =
      exec::evaluate_samples(model, input.samples, args.batch_size, input.cut_length, progress);
  if (show_progress) fmt::print(stderr, "\n");
  if (args.json) {
    nlohmann::json j = {{"loss", result.loss},       {"tokens", result.tokens},
                        {"rows", input.rows_scored}, {"rows_read", input.rows},
                        {"format", input.format},    {"rows_cut", input.rows_cut}};
    j["rows_windowed"] = input.rows_windowed;
    if (!input.template_name.empty()) j["template"] = input.template_name;
    if (input.rows_cut > 0) j["seq_len"] = input.cut_length;
    if (input.rows_windowed > 0) j["window"] = input.cut_length;
    fmt::print("{}\n", j.dump());
  } else if (input.rows_scored == input.rows) {
    fmt::print("loss {:.6f} over {} predicted tokens ({} rows)\n", result.loss, result.tokens,
               input.rows);
  } else {
    const int64_t unscored = input.rows - input.rows_scored;
    fmt::print(
        "loss {:.6f} over {} predicted tokens ({} of {} rows; {} no token to predict)\n",
        result.loss, result.tokens, input.rows_scored, input.rows,
        unscored == 1 ? std::string("the other has") : fmt::format("the other {} have", unscored));
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand(
      "eval",
      "Mean next-token cross-entropy of a model over a dataset, or (--task math) the exact-match "
      "accuracy of its greedy answers");
  cmd->add_option("--model", args->model, "Hugging Face model folder")
      ->check(shell_expanded_path())
      ->required();
  cmd->add_option("--task", args->task,
                  "loss (mean cross-entropy) or math (greedy answers, final answer extracted and "
                  "compared: accuracy)")
      ->capture_default_str();
  cmd->add_option("--answer-field", args->answer_field,
                  "math: the reference's field (default: the response field: answer, response, "
                  "completion, output, or the last assistant turn)");
  cmd->add_option("--out", args->out,
                  "math: write each row's prompt, output, extracted answer, reference and verdict "
                  "(JSONL)")
      ->check(shell_expanded_path());
  cmd->add_option("--max-new-tokens", args->max_new_tokens,
                  "math: answer tokens at most (at least 1)")
      ->capture_default_str();
  cmd->add_option("--stop", args->stop, "math: stop an answer at this text (repeatable)");
  cmd->add_option("--device", args->device,
                  "math: auto (a GPU in bf16 if any, else the CPU in f32), cpu or cuda")
      ->capture_default_str();
  cmd->add_option("--device-memory-gb", args->device_memory_gb,
                  "math: device memory generation may use (GB; 0 = the GPU's free memory): "
                  "blocks that do not fit stream from host memory")
      ->capture_default_str();
  cmd->add_option("--data", args->data, "JSONL (or JSON) dataset")
      ->check(shell_expanded_path())
      ->required();
  cmd->add_option("--format", args->format,
                  "auto (as train detects it), tokens ({\"input_ids\": [...]}, every next "
                  "token predicted) or a text format train reads (alpaca, query_response, "
                  "sharegpt, text: the response tokens predicted, with train's default data "
                  "settings)")
      ->check(CLI::IsMember(kDatasetFormats))
      ->capture_default_str();
  cmd->add_option("--template", args->template_name,
                  "chat template, as data.template (default: the one a checkpoint was trained "
                  "with, else auto)")
      ->check(CLI::IsMember(kChatTemplates));
  cmd->add_option("--prompt-field", args->prompt_field,
                  "query_response: the prompt's field, as data.prompt_field (default: the one a "
                  "checkpoint was trained with, else query, question or prompt)");
  cmd->add_option("--response-field", args->response_field,
                  "query_response: the response's field, as data.response_field (default: the "
                  "one a checkpoint was trained with, else the prompt's pair; with --task math "
                  "the reference unless --answer-field)");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json or its folder (default: the model folder)")
      ->check(shell_expanded_path());
  // Ranges are checked in check_sizes, whose messages name the option.
  cmd->add_option("--seq-len", args->seq_len,
                  "tokens per row at most, as train.seq_len (default: whole rows, in windows "
                  "of the model's max_position_embeddings)");
  cmd->add_option("--batch-size", args->batch_size, "Rows per forward pass")->capture_default_str();
  cmd->add_flag(
      "--json", args->json,
      "Print one JSON line: {\"loss\", \"tokens\", \"rows\" (scored), \"rows_read\", "
      "\"format\", \"template\", \"rows_cut\" (cut at --seq-len), \"rows_windowed\" (split into "
      "windows, no token lost)}; with --task math {\"task\": \"math\", "
      "\"accuracy\", \"n\", \"correct\", \"skipped\" (rows not answered: unreadable, or a "
      "prompt past the model's context), ...}");
  cmd->callback([args, cmd] {
    for (const char* name : kMathOptions) {
      // The loss runs on the CPU: a --device that says so is no mistake.
      const bool says_where_the_loss_runs =
          std::string(name) == "--device" && (args->device == "cpu" || args->device == "auto");
      if (cmd->count(name) > 0 && !says_where_the_loss_runs)
        args->math_options_given.push_back(name);
    }
    run_eval(*args);
  });
}

}  // namespace lt::cli
