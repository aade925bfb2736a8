// `lazytrain generate --model DIR (--prompt TEXT [--system TEXT] [--tools FILE] | --data FILE
//  [--format F]
//  [--prompt-field F] [--batch-size B]) [--template T]
//  [--max-new-tokens N] [--temperature X] [--top-p P] [--top-k K] [--seed S]
//  [--stop STR ...] [--device D] [--device-memory-gb X] [--json]`
#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/rows_stop.h"
#include "cli/shell_expanded_path.h"
#include "data/chat_rows.h"
#include "data/jinja_value.h"
#include "data/prompt_rows.h"
#include "data/unicode.h"
#include "io/hf_folder.h"
#include "train/generation.h"
#include "train/generation_sampling.h"
#include "train/generation_setup.h"
#include "train/trained_template.h"

namespace lt::cli {

namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string model, prompt, data;
  std::string system;  // a system message before --prompt's user message
  std::string tools;   // a JSON file of tools for --prompt
  std::string format = "auto";
  std::string template_name;  // empty: the one a checkpoint was trained with, else auto
  std::string tokenizer;
  std::string prompt_field;  // empty: the one a checkpoint was trained with, else detected
  std::string device = "auto";
  double device_memory_gb = 0;
  int64_t max_new_tokens = 256;
  double temperature = 0.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  int64_t batch_size = 8;
  std::vector<std::string> stop;
  bool json = false;
  // Given on the command line: --seed, --system, any of --temperature,
  // --top-p and --top-k, and the kDataOptions, by name.
  bool seed_given = false;
  bool system_given = false;
  bool sampling_given = false;
  bool max_new_tokens_given = false;
  std::vector<std::string> data_options_given;
};

// The options only --data reads. --prompt refuses them: it would run
// without them, silently.
constexpr std::array<const char*, 3> kDataOptions = {"--format", "--prompt-field", "--batch-size"};

// What a kDataOptions option does, for that refusal.
std::string data_option_use(const std::string& name) {
  if (name == "--format") return "says how the rows of --data are read";
  if (name == "--prompt-field") return "names the prompt's field in query_response rows of --data";
  return "sets how many rows of --data are generated together";
}

// Prints a single prompt's text as its tokens come: what is surely final,
// i.e. whole UTF-8 characters, and not the last bytes that might yet turn
// out to begin a stop string (generation cuts the text before it).
class StreamPrinter {
 public:
  StreamPrinter(const data::Tokenizer& tokenizer, const std::vector<int32_t>& eos_ids,
                const std::vector<std::string>& stops)
      : tokenizer_(tokenizer), eos_ids_(eos_ids), stops_(stops) {
    for (const std::string& s : stops) hold_ = std::max(hold_, s.size() - 1);
  }

  void on_token(int32_t token) {
    if (std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) return;
    // An id past the tokenizer's tokens (a padded vocabulary) has no text.
    if (static_cast<size_t>(token) >= tokenizer_.vocab_size() ||
        !tokenizer_.id_to_token(static_cast<uint32_t>(token)))
      return;
    ids_.push_back(static_cast<uint32_t>(token));
    const std::string bytes = tokenizer_.decode_bytes(ids_);
    if (!start_known_ && !bytes.empty()) skip_dropped_space(bytes);
    size_t limit = bytes.size() > hold_ ? bytes.size() - hold_ : 0;
    for (const std::string& stop : stops_) limit = std::min(limit, bytes.find(stop));
    size_t end = printed_;
    while (end < limit) {
      const size_t len = char_length(static_cast<unsigned char>(bytes[end]));
      if (end + len > limit) break;
      end += len;
    }
    if (end > printed_) {
      std::fputs(data::utf8_lossy(std::string_view(bytes).substr(printed_, end - printed_)).c_str(),
                 stdout);
      std::fflush(stdout);
      printed_ = end;
    }
  }

  // The rest of the stream (cut at a stop string, if any), from the same
  // token-by-token bytes the printed part came from, so that no character
  // is skipped or repeated.
  void finish() {
    const std::string bytes = tokenizer_.decode_bytes(ids_);
    size_t limit = bytes.size();
    for (const std::string& stop : stops_) limit = std::min(limit, bytes.find(stop));
    if (limit > printed_)
      std::fputs(
          data::utf8_lossy(std::string_view(bytes).substr(printed_, limit - printed_)).c_str(),
          stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
  }

 private:
  // SentencePiece-style decoders (Strip, Metaspace) drop the text's first
  // leading space, which the token-by-token bytes keep: the stream starts
  // after it, so that it prints decode()'s text, the --json "text", as
  // transformers' TextStreamer prints the decoded new tokens.
  void skip_dropped_space(const std::string& bytes) {
    start_known_ = true;
    const std::string text = tokenizer_.decode(ids_);
    if (bytes.front() == ' ' && bytes.size() == text.size() + 1 &&
        bytes.compare(1, text.size(), text) == 0)
      printed_ = 1;
  }

  // The bytes of the UTF-8 character a lead byte starts (1 for a stray byte).
  static size_t char_length(unsigned char lead) {
    if (lead >= 0xF0 && lead < 0xF8) return 4;
    if (lead >= 0xE0 && lead < 0xF0) return 3;
    if (lead >= 0xC0 && lead < 0xE0) return 2;
    return 1;
  }

  const data::Tokenizer& tokenizer_;
  const std::vector<int32_t>& eos_ids_;
  std::vector<std::string> stops_;
  std::vector<uint32_t> ids_;
  size_t printed_ = 0;  // bytes of the decoded text already printed
  size_t hold_ = 0;
  bool start_known_ = false;  // whether the first token with text was seen
};

// `row` counts from 1, as the text output's "=== row N" does.
nlohmann::json row_json(const train::Generation& g, int64_t row, int64_t line, bool with_text) {
  nlohmann::json j = {
      {"row", row}, {"output_ids", g.tokens}, {"finish", train::finish_reason_name(g.finish)}};
  if (line > 0) j["line"] = line;
  if (with_text) j["text"] = g.text;
  return j;
}

// The file of --tools, every problem with it led by "--tools FILE": the
// reader names the file alone, which did not say where it was given.
data::jinja::Value read_tools_option(const std::string& file) {
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (!fs::exists(status)) {
    // A parent folder that may not be searched says so, not "no such file".
    fail("--tools ", file, ": cannot read it: ",
         ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such file");
  }
  if (fs::is_regular_file(status) && ::access(file.c_str(), R_OK) != 0)
    fail("--tools ", file, ": cannot read it: ", std::strerror(errno));
  try {
    return data::rows::read_tools_file(file);
  } catch (const Error& e) {
    // The reader leads with the file: "FILE: not valid JSON (... at line
    // 3, column 5 ...)", "FILE: cannot open the file".
    const std::string message = e.what();
    const std::string rest =
        message.starts_with(file + ": ") ? message.substr(file.size() + 2) : message;
    fail("--tools ", file, ": ", rest);
  }
}

// The model folder's generation_config.json for the notes below, read once;
// an empty object when there is none (a malformed one was refused as the
// EOS ids were read).
nlohmann::json generation_config_of(const std::string& model) {
  const fs::path file = fs::path(model) / io::kHfGenerationFile;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return nlohmann::json::object();
  std::ifstream in(file);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json::object();
}

// The note when the model folder's generation_config.json (`j`) asks for
// sampling (do_sample true) and no sampling option was given: transformers'
// generate() would sample there, this run is greedy. Empty when it does not
// ask (or there is no such file).
std::string sampling_config_note(const std::string& model, const nlohmann::json& j) {
  const auto sample = j.find("do_sample");
  if (sample == j.end() || !sample->is_boolean() || !sample->get<bool>()) return "";
  std::string values = "do_sample true";
  // transformers samples at temperature 1.0 when the file gives none.
  std::string flags = "--temperature 1.0";
  for (const char* key : {"temperature", "top_p", "top_k"}) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number()) continue;
    values += fmt::format(", {} {}", key, it->dump());
    const double v = it->get<double>();
    const std::string key_name = key;
    if (key_name == "temperature" && v > 0) flags = "--temperature " + it->dump();
    if (key_name == "top_p" && v < 1) flags += " --top-p " + it->dump();
    if (key_name == "top_k" && v > 0) flags += " --top-k " + it->dump();
  }
  return fmt::format(
      "generate: note: {}'s generation_config.json asks for sampling ({}); this run is greedy, "
      "as generate is without --temperature: give {} to sample as it asks",
      model, values, flags);
}

// The note when generation_config.json sets what generate does not apply
// and transformers' generate() would (a trial saw repetition_penalty and
// max_new_tokens differ from transformers without a word): its length
// limits unless --max-new-tokens is given, a repetition penalty, beams, a
// minimum length. Empty when it sets none of them.
std::string unapplied_config_note(const GenerateArgs& args, const nlohmann::json& j) {
  std::vector<std::string> set, advice;
  const auto number = [&](const char* key) -> std::optional<double> {
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? std::optional<double>(it->get<double>())
                                            : std::nullopt;
  };
  const auto say = [&](const char* key) {
    set.push_back(fmt::format("{} {}", key, j.at(key).dump()));
  };
  if (!args.max_new_tokens_given) {
    if (const auto n = number("max_new_tokens"); n && *n >= 1) {
      say("max_new_tokens");
      advice.push_back(
          fmt::format("give --max-new-tokens {} for its length (the default here is {})",
                      j.at("max_new_tokens").dump(), args.max_new_tokens));
    } else if (const auto total = number("max_length"); total && *total >= 1) {
      say("max_length");
      advice.push_back("give --max-new-tokens for a length (max_length counts the prompt too)");
    }
  }
  // Each key with the value at which it does nothing.
  bool unsupported = false;
  for (const auto& [key, inert] : {std::pair<const char*, double>{"repetition_penalty", 1.0},
                                   {"no_repeat_ngram_size", 0.0},
                                   {"num_beams", 1.0},
                                   {"min_new_tokens", 0.0},
                                   {"min_length", 0.0}}) {
    const auto value = number(key);
    if (!value || *value == inert) continue;
    say(key);
    unsupported = true;
  }
  if (unsupported)
    advice.push_back(
        "generate has no repetition penalty, beam search or minimum length: its outputs differ "
        "from transformers' there");
  if (set.empty()) return "";
  return fmt::format(
      "generate: note: {}'s generation_config.json sets {}, which this command "
      "does not apply; {}",
      args.model, fmt::join(set, ", "), fmt::join(advice, "; "));
}

// The --prompt's tokens, laid out with the tools of --tools. A built-in
// layout refuses tools as a data row's ("the row has tools"); here no row
// has them, --tools gave them, and the refusal says so. A --system message
// goes first, as a row's "system" field does in training (an empty one adds
// no turn, as an empty field adds none): the template lays it out, or, with
// no system role of its own (Mistral's), puts it where it puts a row's.
std::vector<int32_t> chat_with_tools_option(const data::PromptRenderer& renderer,
                                            const GenerateArgs& args,
                                            const data::jinja::Value& tools) {
  try {
    std::vector<data::ChatMessage> messages;
    if (!args.system.empty()) messages.push_back({data::Role::kSystem, args.system});
    messages.push_back({data::Role::kUser, args.prompt});
    return renderer.chat(messages, tools);
  } catch (const data::jinja::TemplateRaised& e) {
    const std::string message = e.what(), row = "the row has tools";
    if (args.tools.empty() || !message.starts_with(row)) throw;
    fail("generate: --tools ", args.tools, " gives tools", message.substr(row.size()));
  }
}

void run_generate(const GenerateArgs& args) {
  LT_CHECK(!args.prompt.empty() || !args.data.empty(),
           "generate: give --prompt TEXT (not empty) or --data FILE.jsonl");
  LT_CHECK(args.prompt.empty() || args.data.empty(),
           "generate: give one of --prompt TEXT and --data FILE.jsonl, not both");
  // Before the model loads, as every check of the options alone.
  train::check_sampling_options({args.temperature, args.top_k, args.top_p});
  LT_CHECK(args.batch_size >= 1, "generate: --batch-size must be at least 1 (rows generated ",
           "together); got ", args.batch_size);
  // Asked for, they would silently do nothing: --temperature 0 is greedy.
  LT_CHECK(args.temperature > 0 || (args.top_k == 0 && args.top_p >= 1.0),
           "generate: --top-k and --top-p shape sampling, which needs --temperature above 0 (0, "
           "the default, is greedy decoding); set --temperature, e.g. 0.7");
  LT_CHECK(args.temperature > 0 || !args.seed_given,
           "generate: --seed seeds sampling, which needs --temperature above 0 (0, the default, "
           "is greedy decoding, which draws nothing); set --temperature, e.g. 0.7, or leave "
           "--seed out");
  // 0 would make no token at all: the library allows it, the command does not.
  LT_CHECK(args.max_new_tokens >= 1,
           "generate: --max-new-tokens must be at least 1 (new tokens per row at most); got ",
           args.max_new_tokens);
  train::check_stop_strings(args.stop);  // before the model loads
  LT_CHECK(args.tools.empty() || args.data.empty(),
           "generate: --tools goes with --prompt; --data rows carry their own \"tools\"");
  LT_CHECK(!args.system_given || args.data.empty(),
           "generate: --system goes with --prompt; --data rows carry their own system prompt (a "
           "\"system\" field, or a system turn): put it in the rows");
  if (!args.prompt.empty() && !args.data_options_given.empty()) {
    const std::string& name = args.data_options_given.front();
    fail("generate: ", name, " ", data_option_use(name), "; --prompt is one user message: give ",
         "--data, or leave ", name, " out");
  }
  data::jinja::Value tools;  // null: none
  if (!args.tools.empty()) tools = read_tools_option(args.tools);
  check_model_folder(args.model, "--model ");
  train::GenerationModel g = train::load_generation_model(
      args.model, args.tokenizer, args.device, /*tokenizer_required=*/!args.prompt.empty(),
      args.prompt.empty() ? "generate --data" : "generate --prompt");
  if (const std::string note = train::eos_outside_vocabulary_note(g, "generate"); !note.empty())
    fmt::print(stderr, "{}\n", note);
  const nlohmann::json generation_config = generation_config_of(args.model);
  if (!args.sampling_given) {
    if (const std::string note = sampling_config_note(args.model, generation_config); !note.empty())
      fmt::print(stderr, "{}\n", note);  // also under --json
  }
  if (const std::string note = unapplied_config_note(args, generation_config); !note.empty())
    fmt::print(stderr, "{}\n", note);  // also under --json
  const train::PromptTemplate chosen =
      train::prompt_template(args.model, args.template_name, "generate");

  data::PromptSet prompts;
  std::string source;
  if (!args.prompt.empty()) {
    data::PromptRenderer renderer(*g.tokenizer, g.tokenizer_path, chosen.name);
    prompts.rows.push_back({0, chat_with_tools_option(renderer, args, tools), std::nullopt});
    prompts.format = "prompt";
    prompts.template_name = renderer.template_name();
    prompts.turn_end = renderer.turn_end();
    source = "--prompt";
  } else {
    data::PromptOptions options;
    options.format = args.format;
    options.template_name = chosen.name;
    options.tokenizer_path = g.tokenizer_path;
    const train::PromptFields fields =
        train::prompt_fields(args.model, {args.prompt_field, "", ""}, false, "generate");
    options.prompt_field = fields.prompt;
    options.fields_where_present = fields.trained();
    options.settings = data::kCommandOptions;
    prompts = data::load_prompts(args.data, g.tokenizer ? &*g.tokenizer : nullptr, options);
    source = args.data;
    if (fields.trained() && prompts.prompt_field == fields.prompt)
      fmt::print(stderr, "{}\n", fields.note);
    const train::PromptsPastContext past_context =
        train::leave_out_prompts_past_context(prompts, args.data, g.model.config());
    const std::string skipped =
        train::skipped_rows_line("generate", prompts, past_context, args.data);
    if (!skipped.empty()) fmt::print(stderr, "{}\n", skipped);
  }
  // Also under --json (on stderr): which layout the prompts took matters.
  if (!chosen.note.empty() && !prompts.template_name.empty())
    fmt::print(stderr, "{}\n", chosen.note);
  train::check_prompts_fit(prompts, source, g.model.config(), args.model);
  train::place_generation_model(g, args.device_memory_gb, prompts, args.batch_size,
                                args.max_new_tokens);

  train::GenerationOptions options;
  options.max_new_tokens = args.max_new_tokens;
  options.sampling = {args.temperature, args.top_k, args.top_p};
  options.seed = args.seed;
  options.batch_size = args.batch_size;
  options.stop_strings = args.stop;
  options.tokenizer = g.tokenizer ? &*g.tokenizer : nullptr;
  options.eos_ids = g.eos_ids;
  options.streamed = g.streamed.get();
  // The token that ends a trained answer in this template (<|im_end|>,
  // <|eot_id|>, EOS): a model fine-tuned by train emits it when done.
  if (prompts.turn_end && std::find(options.eos_ids.begin(), options.eos_ids.end(),
                                    *prompts.turn_end) == options.eos_ids.end()) {
    options.eos_ids.push_back(*prompts.turn_end);
  }
  // Also under --json (on stderr, as the notes above): what streams and
  // the bound it keeps matter as much to a script's log.
  fmt::print(stderr, "generate: {} prompt{} ({}{}), on {}\n", prompts.rows.size(),
             prompts.rows.size() == 1 ? "" : "s", prompts.format,
             prompts.template_name.empty() ? "" : ", template " + prompts.template_name,
             train::generation_device_text(g));

  std::vector<std::vector<int32_t>> ids;
  for (auto& row : prompts.rows) ids.push_back(row.ids);
  const bool stream = !args.json && !args.prompt.empty() && g.tokenizer;
  std::unique_ptr<StreamPrinter> printer;
  if (stream) printer = std::make_unique<StreamPrinter>(*g.tokenizer, options.eos_ids, args.stop);
  // Note [Stopping eval and generate]: each row is printed once it and the
  // rows before it are done; a stop prints the other rows answered too.
  std::vector<train::Generation> out(ids.size());
  int64_t made = 0;
  const auto print_row = [&](int64_t index) {
    const auto i = static_cast<size_t>(index);
    made += static_cast<int64_t>(out[i].tokens.size());
    if (args.json) {
      fmt::print("{}\n", row_json(out[i], index + 1, prompts.rows[i].line, g.tokenizer.has_value())
                             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else if (printer) {
      printer->finish();
    } else {
      fmt::print("=== row {}{} ({}) ===\n{}\n", i + 1,
                 prompts.rows[i].line > 0 ? fmt::format(", line {}", prompts.rows[i].line) : "",
                 train::finish_reason_name(out[i].finish),
                 g.tokenizer ? out[i].text : fmt::format("{}", fmt::join(out[i].tokens, " ")));
    }
    std::fflush(stdout);
  };
  train::RowsInOrder in_order(ids.size(), print_row);
  options.on_row_done = [&](int64_t index, const train::Generation& row) {
    out[static_cast<size_t>(index)] = row;
    in_order.done(index);
  };
  // A count on stderr where the rows go elsewhere (a file, a pipe).
  const bool show_progress = ids.size() > 1 && isatty(STDERR_FILENO) && !isatty(STDOUT_FILENO);
  // --prompt's one row is printed as it is made: a signal ends it at once.
  std::optional<RowsStopRequest> stop;
  if (args.prompt.empty()) stop.emplace();
  options.on_batch_done = [&](int64_t done, int64_t total) {
    if (show_progress) fmt::print(stderr, "\rgenerate: {}/{} rows answered", done, total);
    if (stop && done < total) stop->throw_if_requested();  // the last batch ends the run anyway
  };
  const auto start = std::chrono::steady_clock::now();
  try {
    train::generate(g.model, ids, options, [&](int64_t, int32_t token) {
      if (printer) printer->on_token(token);
    });
  } catch (const RowsStopped& stopped) {
    const int64_t in_row_order = in_order.emitted();
    const int64_t past = in_order.flush_done();
    std::vector<std::string> parts;
    if (in_row_order > 0) parts.push_back(fmt::format("rows 1 to {} in order", in_row_order));
    if (past > 0) {
      parts.push_back(
          fmt::format("then {} more past row {}, the first one not answered (each with its number)",
                      past, in_row_order + 1));
    }
    say_on_stderr(
        fmt::format("{}generate: stopped by signal {} after the batch in flight; {} of "
                    "{} rows were printed{}",
                    show_progress ? "\n" : "", stopped.signal, in_row_order + past, ids.size(),
                    parts.empty() ? "" : fmt::format(" ({})", fmt::join(parts, ", "))));
    end_by_signal(stopped.signal);
  }
  if (show_progress) fmt::print(stderr, "\n");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double tokens_per_s = seconds > 0 ? made / seconds : 0.0;
  if (args.json) {
    // The speed as a last object, told from the rows by having no "row";
    // with the format and template the prompts took, as eval --json gives
    // them (the text output's stderr line says them).
    nlohmann::json speed = {{"new_tokens", made},
                            {"seconds", seconds},
                            {"tokens_per_s", tokens_per_s},
                            {"format", prompts.format}};
    if (!prompts.template_name.empty()) speed["template"] = prompts.template_name;
    if (g.streamed) speed["upload_wait_s"] = g.streamed->upload_wait_s();
    fmt::print("{}\n", speed.dump());
  }
  std::fflush(stdout);
  if (!args.json) {
    fmt::print(
        stderr, "generate: {} new tokens in {:.2f} s ({:.1f} tokens/s{}{})\n", made, seconds,
        tokens_per_s,
        out.size() == 1 ? fmt::format(", stopped: {}", train::finish_reason_name(out[0].finish))
                        : "",
        g.streamed
            ? fmt::format(", {:.2f} s waiting for weight copies", g.streamed->upload_wait_s())
            : "");
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand(
      "generate", "Generate text from a model: one --prompt (streamed) or every row of --data");
  cmd->add_option("--model", args->model, "Hugging Face model folder")
      ->check(shell_expanded_path())
      ->required();
  cmd->add_option("--prompt", args->prompt,
                  "A user message, rendered with the chat template as training renders it");
  cmd->add_option("--system", args->system,
                  "With --prompt: a system message before it, rendered with the chat template as "
                  "training renders a row's \"system\" field");
  cmd->add_option("--tools", args->tools,
                  "With --prompt: a JSON file of tools (a list of schemas, as a dataset row's "
                  "\"tools\") the chat template lays out for the model")
      ->check(shell_expanded_path());
  cmd->add_option("--data", args->data,
                  "JSONL (or JSON) rows: {\"input_ids\": [...]} or a format train reads (the "
                  "prompt part is used)")
      ->check(shell_expanded_path());
  cmd->add_option("--format", args->format,
                  "auto, tokens, text, query_response, alpaca or sharegpt (for --data)")
      ->check(CLI::IsMember(kDatasetFormats))
      ->capture_default_str();
  cmd->add_option("--prompt-field", args->prompt_field,
                  "query_response rows of --data: the prompt's field, as data.prompt_field "
                  "(default: the one a checkpoint was trained with, else query, question or "
                  "prompt)");
  cmd->add_option("--template", args->template_name,
                  "chat template, as data.template (default: the one a checkpoint was trained "
                  "with, else auto)")
      ->check(CLI::IsMember(kChatTemplates));
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.json or its folder (default: the model folder)")
      ->check(shell_expanded_path());
  cmd->add_option("--max-new-tokens", args->max_new_tokens,
                  "New tokens per row at most (at least 1)")
      ->capture_default_str();
  cmd->add_option("--temperature", args->temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-p", args->top_p, "Nucleus sampling mass (1 = off)")->capture_default_str();
  cmd->add_option("--top-k", args->top_k, "Sample among the k most likely (0 = off)")
      ->capture_default_str();
  // CLI11 would wrap -1 into the unsigned seed 2^64 - 1.
  cmd->add_option(
         "--seed", args->seed,
         "Seed of the sampling, with --temperature above 0 (each row draws its own stream)")
      ->check(CLI::Validator(
          [](const std::string& value) {
            return value.find('-') == std::string::npos
                       ? std::string()
                       : "a seed is a whole number from 0 to 18446744073709551615, not " + value;
          },
          ""))  // a described validator shows in --help after the type ("UINT:UINT")
      ->type_name("UINT")
      ->capture_default_str();
  cmd->add_option("--batch-size", args->batch_size, "Rows of --data generated together")
      ->capture_default_str();
  cmd->add_option("--stop", args->stop, "Stop a row when its text contains this (repeatable)");
  cmd->add_option("--device", args->device, "auto (a GPU in bf16 if any, else the CPU), cpu, cuda")
      ->capture_default_str();
  cmd->add_option("--device-memory-gb", args->device_memory_gb,
                  "Device memory generation may use (GB; 0 = the GPU's free memory): blocks that "
                  "do not fit stream from host memory (on the CPU: through a stand-in device of "
                  "this size)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json,
                "One JSON object per row, in row order: row (from 1), line (only with --data: "
                "the row's line in its file), output_ids (the new tokens), text (when there is a "
                "tokenizer), finish (eos, stop, length, context); then one without row: "
                "new_tokens, seconds, tokens_per_s, format, template (when there is one) (and "
                "upload_wait_s when blocks stream)");
  cmd->callback([args, cmd] {
    args->seed_given = cmd->count("--seed") > 0;
    args->max_new_tokens_given = cmd->count("--max-new-tokens") > 0;
    args->system_given = cmd->count("--system") > 0;
    args->sampling_given =
        cmd->count("--temperature") + cmd->count("--top-p") + cmd->count("--top-k") > 0;
    for (const char* name : kDataOptions) {
      if (cmd->count(name) > 0) args->data_options_given.push_back(name);
    }
    run_generate(*args);
  });
}

}  // namespace lt::cli
