// `lazytrain tokenize`: text on stdin to token ids on stdout, or back.
//
//   lazytrain tokenize --tokenizer FILE_OR_FOLDER [--json]   < text  > ids
//   lazytrain tokenize --tokenizer FILE_OR_FOLDER --decode [--json]   < ids   > text
//   lazytrain tokenize --tokenizer FOLDER --data FILE [--rows N] [--json]
//     (a dataset's first rows as training reads them: tokenize_data.h)
//
// Encoding reads all of stdin byte for byte (a trailing newline is text
// too) and adds no special tokens. Decoding reads {"ids": [...]}, a JSON
// list, or whitespace-separated ids, and prints the text exactly (with
// --json, as {"text": ...}).
//
// The hidden --bench FILE times encoding for bench/tokenizer_bench.sh: FILE
// is JSONL, one JSON string (a document) per line; each document is encoded
// on its own, as a data loader would.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/shell_expanded_path.h"
#include "cli/tokenize_data.h"
#include "core/error.h"
#include "core/json_brief.h"
#include "data/tokenizer.h"

namespace lt::cli {

namespace {

struct TokenizeOptions {
  std::string tokenizer;
  bool decode = false;
  bool json = false;
  std::string bench_file;
  int bench_rounds = 5;
  TokenizeDataOptions data;                     // with data.data set: show a dataset's rows
  std::vector<std::string> data_options_given;  // the options of --data given, by name
};

std::string read_stdin() {
  // Binary mode: the text is read byte for byte. (A no-op on POSIX, where
  // it can only fail for a closed stdin, which fread reports below.)
  if (std::freopen(nullptr, "rb", stdin) == nullptr) fail("cannot reopen standard input");
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), stdin)) > 0) text.append(buffer, n);
  if (std::ferror(stdin)) fail("reading standard input failed");
  return text;
}

void write_stdout(std::string_view bytes) {
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  std::fflush(stdout);
}

std::vector<uint32_t> parse_ids(const std::string& input) {
  size_t first = input.find_first_not_of(" \t\r\n");
  std::vector<uint32_t> ids;
  if (first == std::string::npos) return ids;
  auto as_id = [](const nlohmann::json& value, size_t index) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() > UINT32_MAX) {
      fail("stdin: ids[", index, "]: expected a non-negative integer, found ", brief_json(value));
    }
    return static_cast<uint32_t>(value.get<int64_t>());
  };
  if (input[first] == '{' || input[first] == '[') {
    nlohmann::json parsed;
    try {
      parsed = nlohmann::json::parse(input);
    } catch (const nlohmann::json::parse_error& e) {
      fail("stdin: not valid JSON (", e.what(), ")");
    }
    const nlohmann::json* list = &parsed;
    if (parsed.is_object()) {
      auto it = parsed.find("ids");
      if (it == parsed.end())
        fail("stdin: expected {\"ids\": [...]}, the field \"ids\" is missing");
      list = &*it;
    }
    if (!list->is_array())
      fail("stdin: field \"ids\": expected a list of ids, found ", list->type_name());
    for (size_t i = 0; i < list->size(); ++i) ids.push_back(as_id((*list)[i], i));
    return ids;
  }
  std::istringstream words(input);
  std::string word;
  while (words >> word) {
    size_t used = 0;
    unsigned long long value = 0;
    try {
      value = std::stoull(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || value > UINT32_MAX || word[0] == '-') {
      fail("stdin: expected token ids (non-negative integers), found \"", word, "\"");
    }
    ids.push_back(static_cast<uint32_t>(value));
  }
  return ids;
}

std::vector<std::string> read_bench_documents(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, ": cannot open the file");
  std::vector<std::string> documents;
  std::string line;
  for (size_t line_number = 1; std::getline(in, line); ++line_number) {
    if (line.empty()) continue;
    try {
      documents.push_back(nlohmann::json::parse(line).get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      fail(file, ": line ", line_number, ": expected a JSON string (", e.what(), ")");
    }
  }
  return documents;
}

// One warm-up pass (fills the word cache, as HF's fills its own), then
// `rounds` timed passes; prints one JSON line with each pass's seconds.
void run_bench(const data::Tokenizer& tokenizer, const TokenizeOptions& options) {
  std::vector<std::string> documents = read_bench_documents(options.bench_file);
  size_t bytes = 0;
  for (const auto& document : documents) bytes += document.size();
  std::vector<uint32_t> ids;
  size_t tokens = 0;
  for (const auto& document : documents) {
    ids.clear();
    tokenizer.encode(document, ids);
    tokens += ids.size();
  }
  nlohmann::json seconds = nlohmann::json::array();
  for (int round = 0; round < options.bench_rounds; ++round) {
    auto start = std::chrono::steady_clock::now();
    for (const auto& document : documents) {
      ids.clear();
      tokenizer.encode(document, ids);
    }
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  nlohmann::json report = {
      {"documents", documents.size()}, {"bytes", bytes}, {"tokens", tokens}, {"seconds", seconds}};
  fmt::print("{}\n", report.dump());
}

void run_tokenize(const TokenizeOptions& options) {
  // Before the tokenizer loads, as every check of the options alone.
  if (options.data.rows < 1)
    fail("--rows must be at least 1 (the rows of --data shown); got ", options.data.rows);
  if (options.data.seq_len < 0 ||
      (options.data.seq_len == 0 &&
       std::find(options.data_options_given.begin(), options.data_options_given.end(),
                 std::string("--seq-len")) != options.data_options_given.end()))
    fail("--seq-len must be at least 1 (the tokens a row keeps), or left out; got ",
         options.data.seq_len);
  // Without --data they would be ignored: stdin is encoded as it is.
  if (options.data.data.empty() && !options.data_options_given.empty()) {
    fail(options.data_options_given.front(), " shapes how --data's rows are read; without --data, ",
         "tokenize encodes stdin as it is: give --data FILE, or leave ",
         options.data_options_given.front(), " out");
  }
  // --data reads no stdin, so --decode would do nothing.
  if (options.decode && !options.data.data.empty()) {
    fail("--decode turns token ids on stdin into text; --data shows a file's rows as training ",
         "reads them, ids included with --json: give one of them");
  }
  data::Tokenizer tokenizer = data::Tokenizer::load(options.tokenizer);
  if (!options.bench_file.empty()) {
    run_bench(tokenizer, options);
    return;
  }
  if (!options.data.data.empty()) {
    TokenizeDataOptions data = options.data;
    data.tokenizer = options.tokenizer;
    data.json = options.json;
    show_dataset_rows(tokenizer, data);
    return;
  }
  std::string input = read_stdin();
  if (options.decode) {
    const std::string text = tokenizer.decode(parse_ids(input));
    // The text alone is printed as it is, with no newline added; --json
    // gives it as encoding gives the ids, one object on one line.
    if (options.json) {
      write_stdout(nlohmann::json{{"text", text}}.dump(-1, ' ', false,
                                                       nlohmann::json::error_handler_t::replace) +
                   "\n");
    } else {
      write_stdout(text);
    }
    return;
  }
  std::vector<uint32_t> ids = tokenizer.encode(input);
  std::string out;
  out.reserve(ids.size() * 7 + 16);
  out += options.json ? "{\"ids\": [" : "";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += options.json ? ", " : " ";
    out += std::to_string(ids[i]);
  }
  out += options.json ? "]}\n" : "\n";
  write_stdout(out);
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand(
      "tokenize",
      "Encode stdin to token ids, decode ids to text, or show a dataset's rows as training reads "
      "them (--data)");
  cmd->add_option(
         "--tokenizer", options->tokenizer,
         "tokenizer.json, or a folder with tokenizer.json, encoder.json + vocab.bpe (GPT-2), or "
         "tokenizer.model")
      ->check(shell_expanded_path())
      ->required();
  cmd->add_flag("--decode", options->decode,
                "Read ids ({\"ids\": [...]}, a JSON list or whitespace-separated), print text");
  cmd->add_flag("--json", options->json,
                "Print {\"ids\": [...]} instead of space-separated ids ({\"text\": ...} with "
                "--decode)");
  cmd->add_option("--data", options->data.data,
                  "Show a dataset's first rows as training reads them (format, chat template), "
                  "the trained tokens marked; with --json their ids and labels")
      ->check(shell_expanded_path());
  cmd->add_option("--rows", options->data.rows, "How many rows --data shows (at least 1)")
      ->capture_default_str();
  cmd->add_option("--seq-len", options->data.seq_len,
                  "--data's rows cut at this many tokens, as train.seq_len cuts padded rows "
                  "(data.pack false) and evaluation rows, with the rows cut counted");
  cmd->add_option("--format", options->data.format,
                  "--data's format: auto, tokens, alpaca, query_response, sharegpt or text")
      ->capture_default_str();
  cmd->add_option("--template", options->data.template_name,
                  "--data's chat template: auto (the tokenizer's own), chatml, qwen3, llama3 or "
                  "plain")
      ->capture_default_str();
  cmd->add_option("--prompt-field", options->data.prompt_field, "--data's prompt field");
  cmd->add_option("--response-field", options->data.response_field, "--data's response field");
  cmd->add_flag("--train-on-prompt", options->data.train_on_prompt,
                "--data: train on the prompt tokens too, as data.train_on_prompt");
  // Hidden (empty group): for bench/tokenizer_bench.sh only.
  cmd->add_option("--bench", options->bench_file, "JSONL of documents to time encoding on")
      ->check(shell_expanded_path())
      ->group("");
  cmd->add_option("--bench-rounds", options->bench_rounds, "timed passes over the documents")
      ->group("");
  cmd->callback([options, cmd] {
    for (const char* name : {"--rows", "--seq-len", "--format", "--template", "--prompt-field",
                             "--response-field", "--train-on-prompt"}) {
      if (cmd->count(name) > 0) options->data_options_given.push_back(name);
    }
    run_tokenize(*options);
  });
}

}  // namespace lt::cli
