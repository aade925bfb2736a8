#include "data/prompt_rows.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_brief.h"
#include "data/chat_rows.h"
#include "data/chat_template_jinja.h"
#include "data/dataset.h"
#include "data/dataset_source.h"
#include "data/jinja_value.h"

namespace lt::data {

namespace {

namespace fs = std::filesystem;
using json = rows::json;  // ordered: a template prints a row's fields in its order

using rows::member;
using rows::optional_string_field;
using rows::row_fail;
using rows::string_field;

// The query_response fields of a row, chosen as train chooses them
// (rows::choose_query_response_fields), so that the reference is the
// response train would have trained on. A known prompt field left with no
// response field takes its first pair's, which names the field missing
// when no row has it.
void choose_fields(const json& row, std::string* prompt, std::string* response) {
  rows::choose_query_response_fields(row, *prompt, *response);
  for (const auto& [p, r] : rows::kQueryResponsePairs) {
    if (response->empty() && *prompt == p) *response = r;
  }
}

// A reference answer: a string as it is, a number as JSON writes it.
std::optional<std::string> reference_field(const json& row, const std::string& key) {
  const json* value = member(row, key);
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  if (value->is_number()) return value->dump();
  row_fail(key, "expected a string or a number, found " + brief_json(*value));
}

// The turns of a sharegpt row (either naming; chat_rows.h), the last
// assistant turn split off as the reference.
std::vector<ChatMessage> sharegpt_turns(const json& row, std::optional<std::string>* reference) {
  std::vector<ChatMessage> messages = rows::sharegpt_messages(row, /*for_prompts=*/true);
  if (!messages.empty() && messages.back().role == Role::kAssistant) {
    *reference = messages.back().content;
    messages.pop_back();
  }
  if (messages.empty()) {
    row_fail(member(row, "conversations") ? "conversations" : "messages",
             "no turn before the assistant's answer");
  }
  return messages;
}

std::vector<ChatMessage> single_turn(const json& row, std::string prompt) {
  std::vector<ChatMessage> messages;
  std::string system = optional_string_field(row, "system");
  if (!system.empty()) messages.push_back({Role::kSystem, std::move(system)});
  messages.push_back({Role::kUser, std::move(prompt)});
  return messages;
}

// Whether the rows' query_response fields are o's, as train takes
// data.prompt_field and data.response_field: given (either one), or
// trained and the first row has the trained prompt field.
bool fields_apply(const json& row, const PromptOptions& o) {
  if (o.prompt_field.empty() && o.response_field.empty()) return false;
  return !o.fields_where_present || member(row, o.prompt_field);
}

std::string detect_format(const json& row, const PromptOptions& o) {
  if (!o.format.empty() && o.format != "auto") return o.format;
  if (fields_apply(row, o)) return "query_response";
  if (member(row, "input_ids")) return "tokens";
  if (member(row, "conversations") || member(row, "messages")) return "sharegpt";
  if (member(row, "instruction")) return "alpaca";
  for (const auto& [prompt, response] : rows::kQueryResponsePairs) {
    if (member(row, prompt)) return "query_response";
  }
  if (member(row, "text")) return "text";
  std::string keys;
  for (auto it = row.begin(); it != row.end(); ++it) keys += (keys.empty() ? "" : ", ") + it.key();
  fail("cannot tell the prompt format from the fields [", keys,
       "]; expected input_ids, conversations, messages, instruction, query, question, prompt or "
       "text (or set ",
       o.settings.format, ", or ", o.settings.prompt_field, ")");
}

}  // namespace

PromptRenderer::PromptRenderer(const Tokenizer& tokenizer, const fs::path& tokenizer_path,
                               const std::string& template_name)
    : tokenizer_(&tokenizer),
      special_(resolve_special_ids(tokenizer, read_tokenizer_config(tokenizer_path))),
      template_(resolve_template_kind(template_name.empty() ? "auto" : template_name,
                                      read_tokenizer_config(tokenizer_path)),
                tokenizer, special_) {
  if (std::optional<uint32_t> end = template_.turn_end()) turn_end_ = static_cast<int32_t>(*end);
}

std::vector<int32_t> PromptRenderer::chat(const std::vector<ChatMessage>& messages,
                                          const jinja::Value& tools) const {
  // The turns with an answer appended, as training renders them: the prompt
  // is what precedes the last trained run, the answer through its end token.
  // (Not "the turns alone, then on to the first trained token": templates
  // render earlier turns otherwise once an answer follows, Qwen3's think
  // blocks and Mistral's system text, which goes into the user turn only
  // when that turn is the last.) The answer is a word, not "": a template
  // that writes " " + content would leave that space a token of its own at
  // the prompt's end, where training saw it joined to the answer's first
  // word.
  const JinjaChatTemplate* jinja = template_.jinja();
  std::vector<ChatMessage> answered = messages;
  answered.push_back({Role::kAssistant, "Answer"});
  const Sample full = template_.render(answered, false, tools);
  size_t cut = full.ids.size();
  while (cut > 0 && full.labels[cut - 1] == kIgnoreLabel) --cut;
  if (cut == 0) return template_.render(messages, false, tools).ids;  // no answer shown
  while (cut > 0 && full.labels[cut - 1] != kIgnoreLabel) --cut;
  std::vector<int32_t> prompt(full.ids.begin(), full.ids.begin() + cut);
  // A question with tools: transformers' default generation prompt where it
  // is shorter. Qwen3's template lays out a tool call that results follow
  // without the empty think block ending the enable_thinking=false prompt,
  // so a model trained on such rows calls tools after the bare header; and
  // the default is what serving (vLLM, transformers) asks with.
  if (jinja != nullptr && tools.is_array() && !tools.empty() && !messages.empty() &&
      messages.back().role == Role::kUser) {
    const std::vector<uint32_t> asked =
        tokenizer_->encode(jinja->render_text(messages, true, false, tools));
    if (asked.size() < prompt.size() && std::equal(asked.begin(), asked.end(), prompt.begin())) {
      return std::vector<int32_t>(asked.begin(), asked.end());
    }
  }
  return prompt;
}

std::vector<int32_t> PromptRenderer::text(const std::string& text) const {
  std::vector<uint32_t> ids = special_.prefix;
  tokenizer_->encode(text, ids);
  return std::vector<int32_t>(ids.begin(), ids.end());
}

PromptSet load_prompts(const fs::path& file, const Tokenizer* tokenizer, const PromptOptions& o) {
  PromptSet set;
  std::optional<PromptRenderer> renderer;
  std::string prompt_field, response_field;
  const SourceLayout layout = detect_layout(file);
  auto start = [&](const std::string& format) {
    static const std::array<const char*, 5> known = {"tokens", "text", "query_response", "alpaca",
                                                     "sharegpt"};
    LT_CHECK(std::find(known.begin(), known.end(), format) != known.end(), "unknown format \"",
             format, "\"; expected auto, tokens, text, query_response, alpaca or sharegpt");
    set.format = format;
    if (format == "tokens") {
      // Token rows need no template, but a chat model's answer in them ends
      // at its template's turn end (<|im_end|>), which config.json's EOS
      // may not be: generation stops there too, when the template resolves.
      if (tokenizer == nullptr) return;
      try {
        set.turn_end = PromptRenderer(*tokenizer, o.tokenizer_path, o.template_name).turn_end();
      } catch (const Error&) {
        // A template list without a default: the rows still generate.
      }
      return;
    }
    LT_CHECK(tokenizer != nullptr, file.string(), ": the ", format, " format needs a tokenizer");
    // Text prompts take no chat layout: the tokenizer's own is not read
    // (one it cannot use, a list without a default, would refuse them).
    renderer.emplace(*tokenizer, o.tokenizer_path, format == "text" ? "plain" : o.template_name);
    if (format == "text") return;
    set.template_name = renderer->template_name();
    set.turn_end = renderer->turn_end();
  };
  if (layout == SourceLayout::kTextParagraphs) start("text");

  // The format and fields, from the first row with fields, as train
  // takes them (DatasetLoader::plan_from).
  auto plan_from = [&](const json& row, int64_t line) {
    try {
      start(detect_format(row, o));
    } catch (const Error& e) {
      fail(file.string(), ":", line, ": ", e.what());
    }
    if (set.format == "query_response") {
      const bool fields = fields_apply(row, o);
      prompt_field = fields ? o.prompt_field : "";
      response_field = fields ? o.response_field : "";
      choose_fields(row, &prompt_field, &response_field);
      LT_CHECK(!prompt_field.empty(), file.string(), ":", line,
               ": no prompt field (query, question or prompt); name it with ",
               o.settings.prompt_field);
      set.prompt_field = prompt_field;
    }
    set.reference_field = !o.answer_field.empty()          ? o.answer_field
                          : set.format == "query_response" ? response_field
                          : set.format == "alpaca"         ? "output"
                          : set.format == "sharegpt"       ? "(the last assistant turn)"
                                                           : "";
  };

  // The prompt of one JSON row in the planned format; a rows::RowError (or
  // the template's jinja::TemplateRaised) when it has none.
  auto prompt_of = [&](const json& value) {
    PromptRow row;
    std::optional<std::string> reference;
    if (set.format == "tokens") {
      const json* ids = member(value, "input_ids");
      if (ids == nullptr || !ids->is_array() || ids->empty())
        row_fail("input_ids", "expected a non-empty list of token ids");
      for (const json& id : *ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
          row_fail("input_ids", brief_json(id) + " is not a token id");
        row.ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
      // The padding an attention_mask marks at either end is no part of the
      // prompt (train leaves it out too); a mask train refuses, refused.
      const auto [first, last] = rows::attended_span(value, row.ids.size());
      row.ids = std::vector<int32_t>(row.ids.begin() + first, row.ids.begin() + last);
    } else if (set.format == "text") {
      row.ids = renderer->text(string_field(value, "text", "text"));
    } else if (set.format == "query_response") {
      row.ids = renderer->chat(single_turn(value, string_field(value, prompt_field, prompt_field)));
      if (!response_field.empty()) reference = reference_field(value, response_field);
    } else if (set.format == "alpaca") {
      std::string prompt = string_field(value, "instruction", "instruction");
      const std::string input = optional_string_field(value, "input");
      if (!input.empty()) prompt += "\n" + input;
      std::vector<ChatMessage> turns = single_turn(value, std::move(prompt));
      rows::insert_history(value, turns, /*for_prompts=*/true);
      row.ids = renderer->chat(turns);
      reference = reference_field(value, "output");
    } else {
      const std::vector<ChatMessage> turns = sharegpt_turns(value, &reference);
      row.ids = renderer->chat(turns, rows::tools_field(value));
    }
    if (!o.answer_field.empty()) reference = reference_field(value, o.answer_field);
    row.reference = std::move(reference);
    return row;
  };

  // Reads one row with `read`, which adds its prompt; a bad one is counted
  // and the first few described.
  auto read_row = [&](int64_t line, auto&& read) {
    std::string problem;
    try {
      read();
      return;
    } catch (const rows::RowError& e) {
      problem = rows::describe(e);
    } catch (const jinja::TemplateRaised& e) {  // the template refusing this row's turns
      problem = std::string("the chat template refuses the row: ") + e.what();
    }
    ++set.skipped;
    if (set.problems.size() < kMaxReportedProblems)
      set.problems.push_back(file.string() + ":" + std::to_string(line) + ": " + problem);
  };
  auto add = [&](PromptRow row, int64_t line) {
    row.line = line;
    set.rows.push_back(std::move(row));
  };

  std::vector<int64_t> unplanned_empty_rows;  // {} rows read before the format was known
  for_each_row(file, layout, [&](const SourceRow& source) {
    ++set.read;
    read_row(source.line, [&] {
      if (!source.problem.empty()) row_fail("", source.problem);
      if (layout == SourceLayout::kTextParagraphs) {
        PromptRow row;
        row.ids = renderer->text(std::string(source.text));
        add(std::move(row), source.line);
        return;
      }
      const json value = rows::parse_object(source.text);  // as train reads it
      if (set.format.empty() && value.empty()) {
        unplanned_empty_rows.push_back(source.line);
        return;
      }
      if (set.format.empty()) {
        plan_from(value, source.line);
        for (int64_t line : unplanned_empty_rows)
          read_row(line, [&] { add(prompt_of(json::object()), line); });
        unplanned_empty_rows.clear();
      }
      add(prompt_of(value), source.line);
    });
    return true;
  });
  for (int64_t line : unplanned_empty_rows) {
    read_row(line, [] {
      row_fail("", "an empty object, and no row has a field to tell the format from");
    });
  }
  if (set.rows.empty()) {
    fail(file.string(), ": no usable prompt (", set.read, " rows, ", set.skipped, " skipped",
         set.problems.empty() ? "" : "; first problem: ",
         set.problems.empty() ? "" : set.problems.front(), ")");
  }
  return set;
}

}  // namespace lt::data
