#include "data/dataset.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/json_brief.h"
#include "core/thread_pool.h"
#include "data/chat_rows.h"
#include "data/chat_template.h"
#include "data/dataset_source.h"
#include "data/jinja_value.h"
#include "data/unicode.h"

namespace lt::data {

namespace {

namespace fs = std::filesystem;
using rows::alpaca_messages;
using rows::is_blank;
using rows::json;
using rows::member;
using rows::response_field;
using rows::row_fail;
using rows::RowError;
using rows::sharegpt_messages;
using rows::single_turn;
using rows::string_field;
using rows::tools_field;

enum class Format { kTokens, kAlpaca, kQueryResponse, kShareGpt, kText };

std::string_view format_name(Format format) {
  switch (format) {
    case Format::kTokens:
      return "tokens";
    case Format::kAlpaca:
      return "alpaca";
    case Format::kQueryResponse:
      return "query_response";
    case Format::kShareGpt:
      return "sharegpt";
    case Format::kText:
      return "text";
  }
  return "?";
}

std::optional<Format> parse_format(std::string_view name) {
  for (Format f : {Format::kTokens, Format::kAlpaca, Format::kQueryResponse, Format::kShareGpt,
                   Format::kText}) {
    if (name == format_name(f)) return f;
  }
  return std::nullopt;
}

// The key whose value holds byte `offset` of a JSON row, found by a scan
// of its strings: the last string before `offset` that a ':' follows.
std::string key_before(std::string_view row, size_t offset) {
  std::string key;
  for (size_t pos = 0; pos < offset && pos < row.size(); ++pos) {
    if (row[pos] != '"') continue;
    size_t end = pos + 1;
    while (end < row.size() && row[end] != '"') end += row[end] == '\\' ? 2 : 1;
    if (end >= offset) break;  // the bad byte is inside this string
    size_t next = row.find_first_not_of(" \t\r\n", end + 1);
    if (next != std::string_view::npos && row[next] == ':')
      key = row.substr(pos + 1, end - pos - 1);
    pos = end;
  }
  return key;
}

void check_utf8(std::string_view row, bool json_row) {
  if (is_valid_utf8(row)) return;
  size_t pos = 0;
  while (pos < row.size()) {
    DecodedChar c = decode_utf8(row, pos);
    if (c.code_point == kInvalidCodePoint) break;
    pos += c.length;
  }
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(row[pos]));
  row_fail(
      json_row ? key_before(row, pos) : std::string(),
      std::string("invalid UTF-8 (byte ") + byte + " at column " + std::to_string(pos + 1) + ")");
}

// The 4 hex digits at `pos` as a number; -1 when they are not.
int hex4(std::string_view text, size_t pos) {
  if (pos + 4 > text.size()) return -1;
  int value = 0;
  for (size_t i = pos; i < pos + 4; ++i) {
    const char c = text[i];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

// A \u escape of half a UTF-16 surrogate pair without the other half (a
// high one not followed by a low one, or a low one alone) names no
// character, and the JSON parser refuses the row with a message about
// U+D800..U+DBFF: said as the escape, where it is and under which key.
void check_surrogate_escapes(std::string_view row) {
  bool in_string = false;
  for (size_t pos = 0; pos < row.size(); ++pos) {
    if (row[pos] == '"') in_string = !in_string;
    if (!in_string || row[pos] != '\\' || pos + 1 == row.size()) continue;
    const int unit = row[pos + 1] == 'u' ? hex4(row, pos + 2) : -1;
    const bool high = unit >= 0xD800 && unit <= 0xDBFF, low = unit >= 0xDC00 && unit <= 0xDFFF;
    if (high && row.substr(pos + 6, 2) == "\\u") {
      const int next = hex4(row, pos + 8);
      if (next >= 0xDC00 && next <= 0xDFFF) {
        pos += 11;  // the pair, less the loop's step
        continue;
      }
    }
    if (high || low) {
      row_fail(key_before(row, pos), "lone surrogate escape " + std::string(row.substr(pos, 6)) +
                                         " at column " + std::to_string(pos + 1) +
                                         " (half of a UTF-16 pair, not a character)");
    }
    ++pos;  // the escaped character, which may be a quote
  }
}

// One row of a JSON layout as its object; RowError when it is not one.
json parse_object(const SourceRow& row) {
  if (!row.problem.empty()) row_fail("", row.problem);
  return rows::parse_object(row.text);
}

// "file:line: field "f": what", as a bad row is reported.
std::string describe(const std::string& where, const RowError& error) {
  return where + ": " + rows::describe(error);
}

// Ids must fit the vocabulary when there is a tokenizer; labels may also be -100.
int32_t token_id(const json& value, const std::string& where, int64_t vocab_size, bool label) {
  if (!value.is_number_integer()) {
    row_fail(where, std::string("expected an integer token id, found ") + value.type_name());
  }
  // Integers above INT64_MAX are kept unsigned, and get<int64_t> would wrap
  // them (2^64 - 100 would read as the ignore label -100).
  const int64_t id = value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX}
                         ? INT64_MAX
                         : value.get<int64_t>();
  if (label && id == kIgnoreLabel) return kIgnoreLabel;
  if (id < 0 || id > INT32_MAX || (vocab_size > 0 && id >= vocab_size)) {
    row_fail(where, brief_json(value) + " is outside the vocabulary [0, " +
                        (vocab_size > 0 ? std::to_string(vocab_size) : std::string("2^31")) + ")");
  }
  return static_cast<int32_t>(id);
}

// The row's tokens without the padding its "attention_mask" marks
// (rows::attended_span).
void drop_padding(const json& row, Sample& sample) {
  const auto [first, last] = rows::attended_span(row, sample.ids.size());
  if (first == 0 && last == sample.ids.size()) return;
  sample.ids = std::vector<int32_t>(sample.ids.begin() + first, sample.ids.begin() + last);
  sample.labels = std::vector<int32_t>(sample.labels.begin() + first, sample.labels.begin() + last);
}

Sample token_sample(const json& row, int64_t vocab_size) {
  const json* ids = member(row, "input_ids");
  if (ids == nullptr) row_fail("input_ids", "missing");
  if (!ids->is_array())
    row_fail("input_ids", std::string("expected a list, found ") + ids->type_name());
  if (ids->empty()) row_fail("input_ids", "empty");
  Sample sample;
  for (size_t i = 0; i < ids->size(); ++i) {
    sample.ids.push_back(
        token_id((*ids)[i], "input_ids[" + std::to_string(i) + "]", vocab_size, false));
  }
  const json* labels = member(row, "labels");
  if (labels == nullptr) {
    sample.labels = sample.ids;
    drop_padding(row, sample);
    return sample;
  }
  if (!labels->is_array() || labels->size() != ids->size()) {
    row_fail("labels", "expected a list as long as input_ids (" + std::to_string(ids->size()) +
                           "), found " +
                           (labels->is_array() ? std::to_string(labels->size()) + " items"
                                               : std::string(labels->type_name())));
  }
  for (size_t i = 0; i < labels->size(); ++i) {
    sample.labels.push_back(
        token_id((*labels)[i], "labels[" + std::to_string(i) + "]", vocab_size, true));
  }
  drop_padding(row, sample);
  if (std::all_of(sample.labels.begin(), sample.labels.end(),
                  [](int32_t l) { return l == kIgnoreLabel; })) {
    row_fail("labels", "every label is -100; nothing to train on");
  }
  return sample;
}

// One parsed row, before tokenization.
struct Record {
  std::vector<ChatMessage> messages;  // chat formats
  json tools;                         // sharegpt: the row's tools, or null
  std::string text;                   // text
  Sample sample;                      // tokens
  int64_t line = 0;                   // where the row starts
};

// Whether an assistant turn calls a tool.
bool calls_tools(const std::vector<ChatMessage>& messages) {
  return std::any_of(messages.begin(), messages.end(), [](const ChatMessage& m) {
    if (!m.fields.is_object()) return false;
    const auto calls = m.fields.find("tool_calls");
    return calls != m.fields.end() && calls->is_array() && !calls->empty();
  });
}

// Whether a tool call's arguments are a string that is not JSON (OpenAI
// rows give them as a JSON string; templates print a string as written, so
// the model would learn to write the broken text).
bool has_unparsable_arguments(const std::vector<ChatMessage>& messages) {
  for (const ChatMessage& m : messages) {
    if (!m.fields.is_object()) continue;
    const auto calls = m.fields.find("tool_calls");
    if (calls == m.fields.end() || !calls->is_array()) continue;
    for (const auto& call : *calls) {
      if (!call.is_object()) continue;
      const auto function = call.find("function");
      const auto& holder = function != call.end() && function->is_object() ? *function : call;
      const auto arguments = holder.find("arguments");
      if (arguments != holder.end() && arguments->is_string() &&
          !json::accept(arguments->get_ref<const std::string&>()))
        return true;
    }
  }
  return false;
}

// Everything load_dataset resolves once per file.
struct Plan {
  Format format = Format::kText;
  std::string prompt_field, response_field;
};

// Picks the format from the first JSON object row; see dataset.h for the order.
Plan detect_plan(const json& row, std::optional<Format> forced, const DatasetOptions& given,
                 const std::string& where) {
  Plan plan;
  auto has = [&](const char* key) { return member(row, key) != nullptr; };
  DatasetOptions options = given;
  if (given.fields_where_present && !has(given.prompt_field.c_str())) {
    options.prompt_field.clear();
    options.response_field.clear();
  }
  if (forced) {
    plan.format = *forced;
  } else if (!options.prompt_field.empty() || !options.response_field.empty()) {
    plan.format = Format::kQueryResponse;
  } else if (has("input_ids")) {
    plan.format = Format::kTokens;
  } else if (has("conversations") || has("messages")) {
    plan.format = Format::kShareGpt;
  } else if (has("instruction") && has("output")) {
    plan.format = Format::kAlpaca;
  } else if (std::any_of(rows::kQueryResponsePairs.begin(), rows::kQueryResponsePairs.end(),
                         [&](const auto& p) { return has(p.first) && has(p.second); })) {
    plan.format = Format::kQueryResponse;
  } else if (has("text")) {
    plan.format = Format::kText;
  } else {
    // A null field counts as absent: said, as it is the usual cause.
    std::string keys;
    bool any_null = false;
    for (auto it = row.begin(); it != row.end(); ++it) {
      keys += (keys.empty() ? "" : ", ") + it.key() + (it->is_null() ? " (null)" : "");
      any_null = any_null || it->is_null();
    }
    fail(where, ": cannot tell the dataset format from the fields [", keys,
         "]; expected input_ids, conversations, messages, instruction+output, query+response, "
         "question+answer, prompt+completion, prompt+response or text (or set ",
         options.settings.format, ", or ", options.settings.prompt_field, " and ",
         options.settings.response_field, ")",
         any_null ? "; a field whose value is null counts as absent" : "");
  }
  if (plan.format != Format::kQueryResponse) return plan;

  plan.prompt_field = options.prompt_field;
  plan.response_field = options.response_field;
  rows::choose_query_response_fields(row, plan.prompt_field, plan.response_field);
  if (plan.prompt_field.empty() || plan.response_field.empty()) {
    // A chat (or alpaca, text, tokens) file under format query_response
    // was told to name its fields; the fields say which format it is.
    std::string other;
    if (forced) {
      DatasetOptions by_fields = given;
      by_fields.prompt_field.clear();
      by_fields.response_field.clear();
      try {
        const Format detected = detect_plan(row, std::nullopt, by_fields, where).format;
        if (detected != *forced) {
          const std::string name(format_name(detected));
          other = "; its fields are those of format " + name + ": set " + options.settings.format +
                  " to " + name + " (or auto)";
        }
      } catch (const Error&) {
      }
    }
    // One of the two found (given, or known): the other is the one to name.
    const std::string& have_prompt = plan.prompt_field;
    const std::string& have_response = plan.response_field;
    if (!have_prompt.empty() || !have_response.empty()) {
      const bool prompt_missing = have_prompt.empty();
      fail(where, ": cannot find the ", prompt_missing ? "prompt" : "response", " field (",
           prompt_missing ? "query, question or prompt" : "response, answer or completion",
           ") beside the ", prompt_missing ? "response" : "prompt", " field \"",
           prompt_missing ? have_response : have_prompt, "\"; name it with ",
           prompt_missing ? options.settings.prompt_field : options.settings.response_field, other);
    }
    fail(where,
         ": cannot find the prompt and response fields (query/response, question/answer, "
         "prompt/completion or prompt/response); name them with ",
         options.settings.prompt_field, " and ", options.settings.response_field, other);
  }
  return plan;
}

// Turns the rows of one file into samples, keeping the report.
class DatasetLoader {
 public:
  DatasetLoader(fs::path file, const Tokenizer* tokenizer, const DatasetOptions& options,
                DatasetReport& report)
      : file_(std::move(file)), tokenizer_(tokenizer), options_(options), report_(report) {}

  std::vector<Sample> load() {
    // Names are checked before reading, so a typo fails at once.
    if (!options_.format.empty() && options_.format != "auto") {
      forced_ = parse_format(options_.format);
      LT_CHECK(forced_.has_value(), "unknown dataset format \"", options_.format,
               "\"; expected auto, tokens, alpaca, query_response, sharegpt or text");
    }
    resolve_template_kind(options_.template_name.empty() ? "auto" : options_.template_name, {});
    const SourceLayout layout = detect_layout(file_);
    if (layout == SourceLayout::kTextParagraphs) {
      LT_CHECK(!forced_ || *forced_ == Format::kText, file_.string(),
               ": a .txt file holds plain text, but the format is \"", options_.format, "\"");
      start(Plan{Format::kText, {}, {}});
    }
    for_each_row(file_, layout, [&](const SourceRow& row) {
      on_row(row, layout);
      return true;
    });
    flush();
    for (int64_t line : unplanned_empty_rows_) {
      bad_row(line, {"", "an empty object, and no row has a field to tell the format from"});
    }
    LT_CHECK(report_.rows > 0, file_.string(), ": no usable samples: the file has no rows");
    if (samples_.empty()) {
      fail(file_.string(), ": no usable samples (", report_.rows, " rows, ", report_.skipped,
           " skipped", report_.problems.empty() ? "" : "; first problem: ",
           report_.problems.empty() ? "" : report_.problems.front(), ")");
    }
    report_.samples = static_cast<int64_t>(samples_.size());
    if (report_.skipped > report_.samples && !options_.accept_mostly_bad) {
      fail(file_.string(), ": ", report_.skipped, " of ", report_.rows,
           " rows are bad, more than the usable ones (", report_.samples,
           "); the first: ", report_.problems.front(),
           ". A file mostly unusable is most often the wrong file, or rows in another format "
           "than ",
           report_.format, " (", options_.settings.format,
           "); lazytrain tokenize --data lists its problems");
    }
    if (calls_without_tools_ > 0) {
      // transformers renders them so, but a misspelt key ("tool") is the
      // likelier cause than a model meant to call tools it was never shown.
      report_.warning +=
          (report_.warning.empty() ? "" : "; ") + std::to_string(calls_without_tools_) +
          (calls_without_tools_ == 1 ? " row calls tools but has" : " rows call tools but have") +
          " no \"tools\" list for the template to show";
    }
    if (unparsable_arguments_ > 0) {
      report_.warning += (report_.warning.empty() ? "" : "; ") +
                         std::to_string(unparsable_arguments_) +
                         (unparsable_arguments_ == 1 ? " row has" : " rows have") +
                         " tool-call arguments that are a string but not valid JSON: the model "
                         "is trained on them as given";
    }
    return std::move(samples_);
  }

 private:
  std::string where(int64_t line) const { return file_.string() + ":" + std::to_string(line); }

  void bad_row(int64_t line, const RowError& error) {
    std::string message = describe(where(line), error);
    if (options_.strict) fail(message);
    ++report_.skipped;
    if (report_.problems.size() < kMaxReportedProblems)
      report_.problems.push_back(std::move(message));
  }

  void start(const Plan& plan) {
    plan_ = plan;
    report_.format = format_name(plan.format);
    report_.prompt_field = plan.prompt_field;
    report_.response_field = plan.response_field;
    if (plan.format == Format::kTokens) return;
    LT_CHECK(tokenizer_ != nullptr, file_.string(), ": the ", format_name(plan.format),
             " format needs a tokenizer");
    TokenizerConfig config;
    if (!options_.tokenizer_path.empty()) config = read_tokenizer_config(options_.tokenizer_path);
    special_ = resolve_special_ids(*tokenizer_, config);
    if (plan.format == Format::kText) return;
    const std::string& name = options_.template_name.empty() ? "auto" : options_.template_name;
    template_.emplace(resolve_template_kind(name, config), *tokenizer_, special_);
    report_.template_name = template_->name();
    if (template_->kind() == TemplateKind::kJinja && !template_->turn_end()) {
      report_.warning =
          "the chat template ends an answer with no special token of this tokenizer (is it the "
          "model's own tokenizer?): the model will not learn where its answers stop";
    }
  }

  // The format comes from the first row with fields: an empty object says
  // nothing of it (it used to refuse the whole file when it came first).
  // The empty objects before that row are bad rows of the format the file
  // has, named as such ("field "instruction": missing") once it is known.
  void plan_from(const json& row, int64_t line) {
    start(detect_plan(row, forced_, options_, where(line)));
    for (int64_t empty_line : unplanned_empty_rows_) {
      try {
        Record empty = parse(json::object());
        empty.line = empty_line;
        pending_.push_back(std::move(empty));
      } catch (const RowError& error) {
        bad_row(empty_line, error);
      }
    }
    unplanned_empty_rows_.clear();
  }

  void on_row(const SourceRow& row, SourceLayout layout) {
    ++report_.rows;
    try {
      Record record;
      if (layout == SourceLayout::kTextParagraphs) {
        if (!row.problem.empty()) row_fail("", row.problem);
        check_utf8(row.text, false);
        record.text = std::string(row.text);
      } else {
        const json value = parse_object(row);
        if (!plan_ && value.empty()) {  // see plan_from
          unplanned_empty_rows_.push_back(row.line);
          return;
        }
        if (!plan_) plan_from(value, row.line);
        record = parse(value);
        if (record.tools.is_null() && calls_tools(record.messages)) ++calls_without_tools_;
        if (has_unparsable_arguments(record.messages)) ++unparsable_arguments_;
      }
      record.line = row.line;
      pending_.push_back(std::move(record));
    } catch (const RowError& error) {
      bad_row(row.line, error);
    }
    // Tokenize in chunks: parallel over rows, and memory bounded by the chunk.
    if (pending_.size() >= kChunkRows) flush();
  }

  Record parse(const json& row) const {
    Record record;
    switch (plan_->format) {
      case Format::kTokens:
        record.sample =
            token_sample(row, tokenizer_ ? static_cast<int64_t>(tokenizer_->vocab_size()) : 0);
        break;
      case Format::kAlpaca:
        record.messages = alpaca_messages(row);
        rows::insert_history(row, record.messages, /*for_prompts=*/false);
        break;
      case Format::kQueryResponse:
        record.messages =
            single_turn(row, string_field(row, plan_->prompt_field, plan_->prompt_field),
                        response_field(row, plan_->response_field, plan_->response_field));
        break;
      case Format::kShareGpt:
        record.messages = sharegpt_messages(row);
        record.tools = tools_field(row);
        break;
      case Format::kText:
        record.text = string_field(row, "text", "text");
        break;
    }
    if (plan_->format == Format::kText && is_blank(record.text)) row_fail("text", "empty text");
    return record;
  }

  Sample tokenize(Record& record) const {
    switch (plan_->format) {
      case Format::kTokens:
        return std::move(record.sample);
      case Format::kText: {
        Sample sample;
        std::vector<uint32_t> ids = special_.prefix;
        tokenizer_->encode(record.text, ids);
        if (special_.eos) ids.push_back(*special_.eos);
        sample.ids.assign(ids.begin(), ids.end());
        sample.labels = sample.ids;
        return sample;
      }
      default:
        return template_->render(record.messages, options_.train_on_prompt, record.tools);
    }
  }

  void flush() {
    if (pending_.empty()) return;
    const size_t first = samples_.size();
    samples_.resize(first + pending_.size());
    // A row the chat template refuses (raise_exception: Gemma's "System role
    // not supported", Mistral's alternation) is a bad row, named and
    // skipped as the others are, not the end of the load.
    std::vector<std::string> refused(pending_.size());
    // 16 rows per task: a row takes tens of microseconds to tokenize, so
    // smaller tasks would spend their time in the pool's bookkeeping.
    parallel_for(0, static_cast<int64_t>(pending_.size()), 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        try {
          samples_[first + i] = tokenize(pending_[i]);
        } catch (const jinja::TemplateRaised& e) {
          refused[i] = e.what();
        }
        samples_[first + i].line = pending_[i].line;
      }
    });
    size_t kept = first;
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (!refused[i].empty()) {
        bad_row(pending_[i].line, {"", "the chat template refuses the row: " + refused[i]});
        continue;
      }
      if (kept != first + i) samples_[kept] = std::move(samples_[first + i]);
      ++kept;
    }
    samples_.resize(kept);
    for (size_t i = first; i < samples_.size(); ++i) {
      report_.tokens += static_cast<int64_t>(samples_[i].ids.size());
      report_.trained_tokens += std::count_if(samples_[i].labels.begin(), samples_[i].labels.end(),
                                              [](int32_t l) { return l != kIgnoreLabel; });
    }
    pending_.clear();
  }

  // Rows parsed before tokenizing them together; bounds the memory of
  // parsed-but-untokenized text to a few MB for typical rows.
  static constexpr size_t kChunkRows = 4096;

  fs::path file_;
  const Tokenizer* tokenizer_;
  const DatasetOptions& options_;
  DatasetReport& report_;
  std::optional<Format> forced_;  // the format named in the options, if not auto
  std::optional<Plan> plan_;
  SpecialIds special_;
  std::optional<ChatTemplate> template_;
  std::vector<Record> pending_;
  std::vector<Sample> samples_;
  int64_t calls_without_tools_ = 0;            // rows with tool calls and no "tools"
  int64_t unparsable_arguments_ = 0;           // rows with has_unparsable_arguments
  std::vector<int64_t> unplanned_empty_rows_;  // lines of {} rows read before the format was known
};

}  // namespace

namespace rows {

json parse_object(std::string_view text) {
  check_utf8(text, true);
  json value;
  try {
    value = parse_row(text);
  } catch (const json::parse_error& e) {
    check_surrogate_escapes(text);
    // e.what() reads "[json.exception.parse_error.101] parse error at ...".
    std::string what = e.what();
    size_t cut = what.find("] ");
    // A pretty-printed file ends its first line's object on a later line.
    const size_t first = text.find_first_not_of(" \t");
    const bool spread = what.find("unexpected end of input") != std::string::npos &&
                        first != std::string::npos && (text[first] == '{' || text[first] == '[');
    row_fail("", "not valid JSON (" + (cut == std::string::npos ? what : what.substr(cut + 2)) +
                     ")" +
                     (spread ? "; the line ends inside the object: its closing bracket is "
                               "missing, or the object goes on past its line as in a "
                               "pretty-printed file (a .jsonl row is one whole object on one "
                               "line; or give the rows as a JSON array in a .json file)"
                             : ""));
  }
  if (!value.is_object())
    row_fail("", std::string("expected a JSON object, found ") + value.type_name());
  return value;
}

}  // namespace rows

std::vector<Sample> load_dataset(const fs::path& file, const Tokenizer* tokenizer,
                                 const DatasetOptions& options, DatasetReport* report) {
  DatasetReport local;
  DatasetReport& out = report ? *report : local;
  out = DatasetReport{};
  return DatasetLoader(file, tokenizer, options, out).load();
}

std::string detect_format(const fs::path& file, const DatasetOptions& options) {
  if (!options.format.empty() && options.format != "auto") {
    LT_CHECK(parse_format(options.format).has_value(), "unknown dataset format \"", options.format,
             "\"; expected auto, tokens, alpaca, query_response, sharegpt or text");
    return options.format;
  }
  const SourceLayout layout = detect_layout(file);
  if (layout == SourceLayout::kTextParagraphs) return std::string(format_name(Format::kText));
  std::optional<Plan> plan;
  int64_t rows = 0;
  std::string first_problem;  // of the first row, when it is not a JSON object with fields
  for_each_row(file, layout, [&](const SourceRow& row) {
    const std::string where = file.string() + ":" + std::to_string(row.line);
    ++rows;
    json value;
    try {
      value = parse_object(row);
      // As load_dataset: the first row with fields decides (plan_from).
      if (value.empty())
        row_fail("", "an empty object, and no row has a field to tell the format from");
    } catch (const RowError& error) {
      // A bad row, which the loader skips or refuses; when every row is
      // one, the first says why (an encoding, most often).
      if (first_problem.empty()) first_problem = describe(where, error);
      return true;
    }
    plan = detect_plan(value, std::nullopt, options, where);
    return false;
  });
  if (!plan) {
    fail(file.string(),
         ": no row is a JSON object with fields, so the dataset format cannot be told",
         rows == 0 ? " (the file has no rows)"
                   : "; the first of its " + std::to_string(rows) + " row" +
                         (rows == 1 ? "" : "s") + ": " + first_problem);
  }
  return std::string(format_name(plan->format));
}

Tokenizer load_tokenizer_for(const std::filesystem::path& path, const std::string& needed_by,
                             const std::string& chosen_by) {
  try {
    return Tokenizer::load(path);
  } catch (const Error& e) {
    fail(needed_by, " needs a tokenizer, read from ", chosen_by, ": ", e.what());
  }
}

void check_ids_in_vocab(const std::vector<Sample>& samples, int64_t vocab,
                        const std::string& source) {
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    auto where = [&] {
      return s.line > 0 ? source + ":" + std::to_string(s.line)
                        : source + ": sample " + std::to_string(i + 1);
    };
    for (size_t j = 0; j < s.ids.size(); ++j) {
      const int32_t id = s.ids[j];
      if (id < 0 || id >= vocab) {
        // A tokenizer whose vocabulary passes the model's was refused before
        // (check_tokenizer_runs_model) and added tokens past it warned of:
        // an id here most often is a tokens row's, made for another model.
        fail(where(), ": token id ", id, " (position ", j,
             " of the row) is outside the model's vocabulary [0, ", vocab,
             "): the ids were made for another vocabulary (a row of input_ids is used as it is: "
             "tokenize its text with this model's tokenizer), or are an added token of the "
             "tokenizer past it (said at the start, when a tokenizer was read)");
      }
    }
    // Labels are what the loss indexes; one outside the vocabulary used to
    // surface only when its batch came up, many steps in, naming no file.
    for (size_t j = 0; j < s.labels.size(); ++j) {
      const int32_t label = s.labels[j];
      if (label != kIgnoreLabel && (label < 0 || label >= vocab)) {
        fail(where(), ": field \"labels[", j, "]\": ", label,
             " is outside the model's vocabulary [0, ", vocab, ") (", kIgnoreLabel,
             " marks a token not trained on)");
      }
    }
  }
}

}  // namespace lt::data
