#pragma once
// Prompts for generation and task evaluation, rendered as training renders
// the same rows (dataset.h, chat_template.h), up to where the model's
// answer would begin.
//
// A row's prompt, by format (auto detects it from the first JSON object
// row with fields, as train does, an empty object before it being a bad
// row: input_ids -> tokens; conversations or messages -> sharegpt;
// instruction -> alpaca; a prompt field query / question / prompt ->
// query_response; text -> text; a .txt file is text paragraphs):
//   tokens          input_ids ("labels" is not read), less the padding at
//                   either end that attention_mask marks 0, as train leaves
//                   it out (rows::attended_span; a mask train refuses makes
//                   a bad row);
//   text            the tokenizer's prefix ids and the text (no EOS);
//   query_response  the user turn is the prompt field ("system"? as train);
//   alpaca          instruction, or instruction + "\n" + input, after the
//                   turns of "history" (rows::insert_history), as train;
//   sharegpt        every turn before the last one when the last is the
//                   assistant's (that one is the reference), else every
//                   turn; read as training reads them (tool calls, tool
//                   turns, the row's tools and system). A row with tools
//                   whose last turn is the user's asks with transformers'
//                   default generation prompt (PromptRenderer::chat).
// The chat formats render the turns plus an empty assistant turn with the
// template, and the prompt is the ids before that turn's first trained
// token: the assistant header ("<|im_start|>assistant\n", Qwen3's empty
// think block, Llama 3's header, or the plain template's "\n") that
// training conditioned the answer on. The token that ends an answer the
// model was trained on (<|im_end|>, <|eot_id|>, the plain template's EOS, a
// Jinja template's special token after the content: ChatTemplate::turn_end)
// is `turn_end` below, which generation stops at.
//
// A row's reference (for `eval --task math`): `answer_field` when given (a
// string, or a number written as JSON writes it), else the response field
// (query_response), output (alpaca) or the final assistant turn
// (sharegpt); none for tokens and text. Rows are not refused for lacking
// one: the evaluation counts those.
//
// Bad rows (not JSON, a missing prompt field, ...) are counted and the first
// ones described as "file:line: field "f": what", as load_dataset does
// (rows are read as it reads them: rows::parse_object); a file with no
// usable row is an lt::Error.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/dataset.h"
#include "data/tokenizer.h"

namespace lt::data {

struct PromptOptions {
  std::string format = "auto";         // auto | tokens | text | query_response | alpaca | sharegpt
  std::string template_name = "auto";  // as DatasetOptions::template_name
  std::filesystem::path tokenizer_path;      // for the template and special ids (as DatasetOptions)
  std::string prompt_field, response_field;  // query_response; empty = detected
  bool fields_where_present = false;         // as DatasetOptions::fields_where_present
  std::string answer_field;                  // reference field; empty = the format's response
  DataSettingNames settings;                 // named by errors
};

struct PromptRow {
  int64_t line = 0;  // where the row starts in its file
  std::vector<int32_t> ids;
  std::optional<std::string> reference;
};

struct PromptSet {
  std::vector<PromptRow> rows;
  std::string format;                         // as resolved
  std::string template_name;                  // empty for tokens and text
  std::string prompt_field, reference_field;  // as resolved, when fields are used
  std::optional<int32_t> turn_end;            // see the header; chat formats only
  int64_t read = 0, skipped = 0;
  std::vector<std::string> problems;  // the first few, "file:line: what"
  // Where the reference answers come from, as a message says it: `the
  // field "answer"`, or "the last assistant turn" for sharegpt rows.
  std::string reference_source() const {
    return reference_field.starts_with("(") ? reference_field.substr(1, reference_field.size() - 2)
                                            : "the field \"" + reference_field + "\"";
  }
};

// Renders prompts for one tokenizer and template.
class PromptRenderer {
 public:
  // `tokenizer` must outlive the renderer. The template is resolved as
  // training resolves it (chat_template.h).
  PromptRenderer(const Tokenizer& tokenizer, const std::filesystem::path& tokenizer_path,
                 const std::string& template_name);
  // `messages` end with a user (or system, or tool) turn; the result is the
  // prompt that asks for the assistant's answer. `tools`: the row's, or null.
  std::vector<int32_t> chat(const std::vector<ChatMessage>& messages,
                            const jinja::Value& tools = nullptr) const;
  // The tokenizer's prefix ids and `text` (the text format).
  std::vector<int32_t> text(const std::string& text) const;
  std::string_view template_name() const { return template_.name(); }
  std::optional<int32_t> turn_end() const { return turn_end_; }

 private:
  const Tokenizer* tokenizer_;
  SpecialIds special_;
  ChatTemplate template_;
  std::optional<int32_t> turn_end_;
};

// `tokenizer` may be null only for token rows.
PromptSet load_prompts(const std::filesystem::path& file, const Tokenizer* tokenizer,
                       const PromptOptions& options);

}  // namespace lt::data
