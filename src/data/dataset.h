#pragma once
// Datasets for training: a JSONL or JSON-array file (or a .txt file) made
// into tokenized Samples with per-token labels, ready for the Batcher.
//
// Formats (the JSON fields of one row):
//   tokens          {"input_ids": [...], "labels": [...]?}: used as they
//                   are; without "labels" every token is trained on. The
//                   same rows `lazytrain eval` reads.
//   alpaca          {"instruction", "input"?, "output", "system"?,
//                   "history"?}: the user turn is instruction, or
//                   instruction + "\n" + input when input is non-empty (as
//                   LLaMA-Factory joins them); the assistant turn is output.
//                   history, [[instruction, response], ...] as LLaMA-Factory
//                   writes it, gives the turns before those, trained as a
//                   sharegpt row's earlier turns are (rows::insert_history).
//   query_response  one prompt and one response field, named by
//                   DatasetOptions or detected from the first row among
//                   query/response (MetaMathQA), question/answer (GSM8K),
//                   prompt/completion, prompt/response; "system"? as alpaca.
//   sharegpt        {"conversations": [{"from", "value"}...]} with from =
//                   system | human | gpt (user / assistant also accepted;
//                   LLaMA-Factory's function_call, whose value is a JSON
//                   call {"name", "arguments"} or a list of them, is an
//                   assistant turn's tool_calls, and observation a tool
//                   turn; the row's "system" is the system prompt), or
//                   {"messages": [{"role", "content"}...]} with role =
//                   system | user | assistant | tool; any number of turns,
//                   at least one by the assistant. Only assistant turns are
//                   trained on unless train_on_prompt. Tool calling as
//                   OpenAI and transformers write it: an assistant turn's
//                   "tool_calls" (its content may then be null or absent),
//                   "tool" turns, the row's "tools" (a list of schemas, or
//                   a string holding one as JSON), and a message's other
//                   fields (name, tool_call_id, reasoning_content, ...) reach
//                   the model's own chat template as transformers passes
//                   them; the built-in layouts refuse such rows.
//   text            {"text": ...} rows, or a .txt file with one sample per
//                   paragraph (blank-line separated; see dataset_source.h).
//                   Paragraphs rather than one whole-file sample so that
//                   padded batching keeps all the text (a whole file would
//                   be cut at seq_len) and packing still fills rows. Each
//                   sample is the tokenizer's prefix ids (Llama-3's BOS),
//                   the text, then EOS when the tokenizer has one; every
//                   token is trained on.
// The chat formats (alpaca, query_response, sharegpt) become conversations
// rendered by a chat template (chat_template.h has the exact layouts).
//
// "auto" format: a .txt file is text; otherwise the first row that is a
// JSON object with fields decides (an empty object {} before it is a bad
// row of the format it decides), in this order: prompt_field/response_field
// set -> query_response; input_ids -> tokens; conversations or messages ->
// sharegpt; instruction and output -> alpaca; a known prompt/response pair
// -> query_response; text -> text. The report says what was chosen.
//
// Bad rows (not JSON, not an object, invalid UTF-8 or a lone surrogate
// escape such as \ud800, a missing field, a field of the wrong type, an
// empty response, an id outside the vocabulary) are counted and the first
// ones described as "file:line: field \"f\": what".
// They are skipped, or with strict the first is an lt::Error with that
// text. A file with no usable sample is an lt::Error, and so is one with
// more bad rows than usable ones unless options.accept_mostly_bad.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/batching.h"
#include "data/tokenizer.h"

namespace lt::data {

// The settings that name the format and the query_response fields for the
// program reading the rows, which the errors asking for them name: train's
// config keys by default; a command gives its options (kCommandOptions).
struct DataSettingNames {
  std::string format = "data.format";
  std::string prompt_field = "data.prompt_field";
  std::string response_field = "data.response_field";
};
inline const DataSettingNames kCommandOptions{"--format", "--prompt-field", "--response-field"};

struct DatasetOptions {
  std::string format = "auto";         // auto | tokens | alpaca | query_response | sharegpt | text
  std::string template_name = "auto";  // auto | chatml | qwen3 | llama3 | plain
  bool train_on_prompt = false;  // also train on prompt tokens (system/user turns, template text)
  bool strict = false;           // the first bad row is an error instead of being skipped
  // Without it, a file with more bad rows than usable ones is an lt::Error:
  // a run on the few good rows of the wrong file, or of rows in another
  // format, would otherwise train and exit 0. `tokenize --data` sets it: it
  // lists a file's problems, however many.
  bool accept_mostly_bad = false;
  // query_response field names; empty = detect from the first row.
  std::string prompt_field, response_field;
  // Set: the fields are defaults (a checkpoint's trained ones), taken only
  // for a file whose first row has the prompt field; others are detected.
  bool fields_where_present = false;
  DataSettingNames settings;  // named by errors
  // The tokenizer.json (or its folder) the Tokenizer was loaded from: the
  // tokenizer_config.json beside it gives the "auto" template and EOS, and
  // tokenizer.json's post-processor the prefix ids. Empty = none of that.
  std::filesystem::path tokenizer_path;
};

// Reports at most this many problems in full: enough to see what is wrong
// with a file without flooding the log; the count covers them all.
inline constexpr size_t kMaxReportedProblems = 20;

struct DatasetReport {
  int64_t rows = 0;                        // rows read (lines, array elements or paragraphs)
  int64_t samples = 0;                     // rows that became samples
  int64_t skipped = 0;                     // bad rows
  int64_t tokens = 0, trained_tokens = 0;  // over all samples; trained = label != -100
  std::vector<std::string> problems;       // the first kMaxReportedProblems, "file:line: what"
  std::string format;                      // as resolved, e.g. "query_response"
  std::string template_name;               // as resolved; empty for tokens and text
  std::string warning;  // what the run should say about the data though it loads; empty if none
  std::string prompt_field, response_field;  // query_response only
};

// `tokenizer` may be null only for the tokens format. `report` may be null.
std::vector<Sample> load_dataset(const std::filesystem::path& file, const Tokenizer* tokenizer,
                                 const DatasetOptions& options, DatasetReport* report);

// The tokenizer a text format needs, read from `path`. When it cannot be
// loaded the error says what needs it (`needed_by`, e.g. "data.format
// alpaca") and which setting chose the path (`chosen_by`), then why.
Tokenizer load_tokenizer_for(const std::filesystem::path& path, const std::string& needed_by,
                             const std::string& chosen_by);

// Throws lt::Error, led by `source` (the file) and the sample's line, at
// the first token id or label outside [0, vocab) (-100 aside): a tokenizer
// other than the model's, or labels made for another vocabulary.
void check_ids_in_vocab(const std::vector<Sample>& samples, int64_t vocab,
                        const std::string& source);

// The format load_dataset would read `file` in: options.format unless it is
// "auto", else what the first row that is a JSON object with fields says
// (or "text" for a .txt file). Reads only up to that row. An lt::Error when
// no row tells, as load_dataset's; when no row is a JSON object with fields
// it names the first row's problem as a bad row is described (an encoding,
// most often).
std::string detect_format(const std::filesystem::path& file, const DatasetOptions& options);

}  // namespace lt::data
