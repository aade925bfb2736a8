#pragma once
// Chat templates: how a conversation becomes token ids and labels for
// supervised fine-tuning. "auto" (the default) renders the model's own
// Jinja chat_template (chat_template.jinja, else tokenizer_config.json's
// "chat_template") as transformers' apply_chat_template does:
// chat_template_jinja.h says how, and which tokens are trained. Four layouts
// are also built in, chosen by name, below.
//
// Exact layouts (S(x) is the single id of special token x, "..." is text
// encoded by the tokenizer; [masked] pieces get label -100 unless
// train_on_prompt, [trained] pieces get label = id):
//
// chatml (Qwen2/2.5). Per message:
//   S(<|im_start|>) "role\n"                      [masked]
//   "content"                                     [masked; trained if assistant]
//   S(<|im_end|>)                                 [masked; trained if assistant]
//   "\n"                                          [masked]
// No default system prompt is inserted (Qwen2.5's template inserts "You are
// Qwen, created by Alibaba Cloud..." when the conversation has no system
// message: we do not). No think block, no split at "</think>".
//
// qwen3: exactly what Qwen3's chat_template
// (tests/data/fixtures/qwen3/tokenizer_config.json) renders with
// add_generation_prompt=False; checked id for id against transformers'
// apply_chat_template (tests/data/fixtures/chat_template_goldens.json),
// but for the label boundary below (a reply of an earlier turn starting
// with a newline: "\n" "\n\n" where transformers has "\n\n\n"). As
// chatml, except for assistant messages:
//   - content with "</think>" is split: the answer is what follows the last
//     "</think>" with leading newlines stripped; the reasoning is what
//     precedes the first one, after the last "<think>" there, newlines
//     stripped at both ends. (A separate reasoning_content field is not
//     supported by this layout: a row with one is refused; the model's own
//     template, data.template: auto, renders it.)
//   - the last query is the last user message that is not just
//     "<tool_response>...</tool_response>"; none: the last message.
//   - an assistant message after the last query that is the final message
//     or has reasoning gets a think block:
//     S(<|im_start|>) "assistant\n"               [masked]
//     empty reasoning:
//       S(<think>) "\n\n" S(</think>) "\n\n"      [masked]
//     else:
//       S(<think>) "\nreasoning\n" S(</think>) "\n\n" [trained]
//     "answer" S(<|im_end|>)                      [trained]
//     "\n"                                        [masked]
//     (here the answer loses its leading newlines even without a split)
//   - any other assistant message: as chatml, with the answer as content
//     (reasoning before the last query is dropped, as Qwen3's does).
// data.template: chatml with a Qwen3 tokenizer still trains the plain
// ChatML layout, for those who want no think blocks.
// The empty block is masked because it is what apply_chat_template(...,
// add_generation_prompt=True, enable_thinking=False) puts in the prompt at
// inference: the model never generates it there, so training on it would
// teach what the prompt already says. Reasoning is the model's output, so a
// non-empty block is trained. Tools, tool calls and the tool role are left
// to the model's own template (auto); the built-in layouts refuse such rows.
//
// llama3 (Meta-Llama-3-8B-Instruct's template):
//   S(<|begin_of_text|>)                          [masked] once, first
//   per message:
//   S(<|start_header_id|>) "role" S(<|end_header_id|>) "\n\n"   [masked]
//   "trimmed content" S(<|eot_id|>)               [masked; trained if assistant]
// Content is trimmed of whitespace at both ends as the template's `| trim`
// does: Python's str.strip(), non-ASCII spaces (U+00A0, U+3000, ...) too.
// Llama 3.1+ templates add a "Cutting Knowledge Date" system block; this
// one, like 3.0's, adds no system text.
//
// plain (any tokenizer; prompt + response + EOS):
//   prefix ids (e.g. Llama-3's S(<|begin_of_text|>)) [masked], only those
//   the tokenizer.json post-processor adds to a single text (HF's
//   add_special_tokens=True); none for GPT-2 and Qwen
//   system and user messages: "content\n"         [masked]
//   assistant messages: "content" S(EOS)          [trained]
// One newline separates a prompt from its response, so that a question's
// last word and the answer's first do not run together. EOS is
// tokenizer_config.json's eos_token, else the first of <|endoftext|>,
// <|end_of_text|>, </s> that the tokenizer has.
//
// Tokenization and the label boundary. Text pieces are encoded separately
// wherever the label changes and concatenated, so the boundary is exact.
// Consecutive pieces with the same label are joined and encoded together;
// special tokens of the template are inserted as ids, never encoded. With a
// chat template the only text-to-text boundary is between "role\n" (or
// "\n\n") and the content; encoding the whole string would give other ids
// there only when the content starts with whitespace that merges with that
// newline (e.g. content "\nHi" gives "\n" "\n" where the whole string gives
// "\n\n"). plain has the same boundary after the prompt's "\n". The ids do
// not depend on train_on_prompt; only the labels do.
//
// Text inside messages is encoded like any text, so a special token written
// in it (say "<|im_end|>") becomes that special id, as Hugging Face's
// tokenizer does with split_special_tokens=False.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/batching.h"
#include "data/jinja_value.h"
#include "data/tokenizer.h"

namespace lt::data {

class JinjaChatTemplate;

enum class Role { kSystem, kUser, kAssistant, kTool };
std::string_view role_name(Role role);  // "system", "user", "assistant", "tool"

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(Role r, std::string text, jinja::Value other = nullptr)
      : role(r), content(std::move(text)), fields(std::move(other)) {}

  Role role = Role::kUser;
  std::string content;  // "" where the row has none (an assistant turn that only calls tools)
  // The message as a Jinja template reads it, for a row's message that has
  // more than a role and a content (tool_calls, name, tool_call_id,
  // reasoning_content, ...): an object, made by template_message(); null:
  // {role, content} alone.
  jinja::Value fields;
};

// A row's message as transformers' apply_chat_template hands it to the
// template (transformers 5's _normalize_chat_messages and
// _alias_reasoning_fields): `role` and `content` as given, every other field
// verbatim in the row's order, fields whose value is null dropped, and, when
// reasoning_content, thinking or reasoning (the first of those not null)
// holds the reasoning, both "thinking" (first) and "reasoning_content" set
// to it, as gpt-oss's and Qwen3's templates read them.
jinja::Value template_message(Role role, const jinja::Value& content,
                              const jinja::Value& other_fields);

// Why a built-in layout cannot render this conversation (tools, tool calls,
// a tool turn, a separate reasoning field: only the model's own template
// knows where they go); empty if it can. Other fields (name, ids) are
// ignored by the built-in layouts.
std::string built_in_layout_refusal(std::span<const ChatMessage> messages,
                                    const jinja::Value& tools);

// What the files beside a tokenizer say about its special tokens.
struct TokenizerConfig {
  std::filesystem::path file;                // the tokenizer_config.json read; empty if none
  std::string chat_template;                 // Jinja source; empty if none
  std::filesystem::path chat_template_file;  // where chat_template came from; empty if none
  // The template named "tool_use" (a list in tokenizer_config.json, or
  // additional_chat_templates/tool_use.jinja as transformers 5 saves it),
  // which transformers renders a conversation with whenever tools are
  // given; empty if none.
  std::string tool_use_template;
  std::filesystem::path tool_use_template_file;
  // Why there is no chat_template though the file has the field (a list of
  // templates none of which is "default"); a template of "auto" is refused
  // with it. Empty otherwise.
  std::string chat_template_error;
  std::optional<std::string> eos_token, bos_token;
  // The other named special tokens transformers passes a chat template
  // (its special_tokens_map): unk_token, sep_token, pad_token, cls_token,
  // mask_token, those the file sets (not null).
  std::map<std::string, std::string> other_special_tokens;
  // Special tokens put before a single text: tokenizer.json's
  // post-processor's (TemplateProcessing "single" up to "$A"), e.g.
  // <|begin_of_text|>; for Llama and Gemma tokenizer classes, bos_token when
  // add_bos_token (default true), as transformers 4.x adds it.
  std::vector<std::string> prefix_tokens;
  std::string prefix_source;             // the file and fields prefix_tokens came from, for errors
  std::filesystem::path tokenizer_json;  // the file prefix_tokens came from; empty if none
};

// Reads tokenizer_config.json (and chat_template.jinja, and tokenizer.json's
// post_processor) from the folder of `tokenizer_path`, which is a
// tokenizer.json, an encoder.json, or their folder. Missing files give an
// empty config; a malformed one is an lt::Error naming the file and field.
// chat_template.jinja, where transformers 5 saves the template, wins over
// tokenizer_config.json's "chat_template", as it does in transformers.
TokenizerConfig read_tokenizer_config(const std::filesystem::path& tokenizer_path);

// The ids a template or a plain-text sample needs beyond the text.
struct SpecialIds {
  std::optional<uint32_t> eos;   // see "plain" above for how it is chosen
  std::vector<uint32_t> prefix;  // config.prefix_tokens as ids
};
SpecialIds resolve_special_ids(const Tokenizer& tokenizer, const TokenizerConfig& config);

enum class TemplateKind { kChatml, kQwen3, kLlama3, kPlain, kJinja };
std::string_view template_kind_name(TemplateKind kind);

// A template as resolved: a built-in layout, or the model's own Jinja
// template (kJinja, with the parsed template).
struct TemplateChoice {
  TemplateChoice(TemplateKind k) : kind(k) {}  // NOLINT: a built-in layout converts implicitly
  TemplateChoice(std::shared_ptr<const JinjaChatTemplate> parsed)
      : kind(TemplateKind::kJinja), jinja(std::move(parsed)) {}
  bool operator==(TemplateKind k) const { return kind == k; }

  TemplateKind kind;
  std::shared_ptr<const JinjaChatTemplate> jinja;
  bool no_template_of_its_own = false;  // "auto" with no chat template: plain
};

// "auto" -> the config's own template (kJinja, reported as "jinja") when
// it has one, plain when there is none at all (a base model's tokenizer,
// GPT-2's). A template the renderer cannot parse (a tag or filter outside
// its subset) is an lt::Error naming the file and line and asking for a
// built-in layout by name: training a chat model in a layout it was not
// tuned on, silently, is worse than stopping. "chatml", "qwen3", "llama3",
// "plain" are the built-in layouts above. Any other name is an lt::Error.
TemplateChoice resolve_template_kind(std::string_view name, const TokenizerConfig& config);

// A template bound to one tokenizer, its special tokens resolved to ids.
// Holds a pointer to the tokenizer, which must outlive it. Thread-safe.
class ChatTemplate {
 public:
  // A special token the template needs but the tokenizer lacks is an
  // lt::Error naming the template and the token.
  ChatTemplate(const TemplateChoice& choice, const Tokenizer& tokenizer, const SpecialIds& special);

  TemplateKind kind() const { return kind_; }
  std::string_view name() const { return template_kind_name(kind_); }

  // The conversation as ids and labels, laid out as above. `tools` (a list,
  // or null) is the row's: the Jinja template reads it as `tools`. What a
  // built-in layout cannot render (built_in_layout_refusal) is a
  // jinja::TemplateRaised, which callers report as the row's refusal.
  Sample render(std::span<const ChatMessage> messages, bool train_on_prompt,
                const jinja::Value& tools = nullptr) const;

  // The model's own template (kJinja), else null.
  const JinjaChatTemplate* jinja() const { return jinja_.get(); }

  // The token that ends an assistant turn, which generation stops at:
  // <|im_end|>, <|eot_id|>, the plain layout's EOS; for a Jinja template the
  // special token that follows an assistant's content. Empty if none.
  std::optional<uint32_t> turn_end() const { return turn_end_; }

 private:
  uint32_t require_token(std::string_view token) const;

  TemplateKind kind_;
  const Tokenizer* tokenizer_;
  SpecialIds special_;
  std::shared_ptr<const JinjaChatTemplate> jinja_;
  bool no_template_of_its_own_;  // see TemplateChoice
  std::optional<uint32_t> turn_end_;
  // chatml: <|im_start|>, <|im_end|>. qwen3: those and <think>, </think>.
  // llama3: <|begin_of_text|>, <|start_header_id|>, <|end_header_id|>,
  // <|eot_id|>.
  uint32_t im_start_ = 0, im_end_ = 0, think_start_ = 0, think_end_ = 0;
  uint32_t begin_of_text_ = 0, start_header_ = 0, end_header_ = 0, eot_ = 0;
};

}  // namespace lt::data
