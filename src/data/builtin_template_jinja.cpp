#include "data/builtin_template_jinja.h"

#include "core/error.h"

namespace lt::data {

namespace {

// Every tag trims the whitespace before it ({%- and {{-), so the line
// breaks below are layout only: the text is the same with or without
// transformers' trim_blocks and lstrip_blocks.

constexpr const char* kChatml = R"JINJA({%- for message in messages %}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- endif %})JINJA";

// Qwen3's template without tools: the last query is the last user message
// that is not a tool response; an assistant message after it gets a think
// block when it is the last message or has reasoning.
constexpr const char* kQwen3 =
    R"JINJA({%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
{%- set index = (messages|length - 1) - loop.index0 %}
{%- if ns.multi_step_tool and message['role'] == 'user' and not(message['content'].startswith('<tool_response>') and message['content'].endswith('</tool_response>')) %}
{%- set ns.multi_step_tool = false %}
{%- set ns.last_query_index = index %}
{%- endif %}
{%- endfor %}
{%- for message in messages %}
{%- if message['role'] != 'assistant' %}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- else %}
{%- set content = message['content'] %}
{%- set reasoning_content = '' %}
{%- if '</think>' in content %}
{%- set content = message['content'].split('</think>')[-1].lstrip('\n') %}
{%- set reasoning_content = message['content'].split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
{%- endif %}
{%- if loop.index0 > ns.last_query_index and (loop.last or reasoning_content) %}
{{- '<|im_start|>assistant\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
{%- else %}
{{- '<|im_start|>assistant\n' + content }}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}
{{- '<think>\n\n</think>\n\n' }}
{%- endif %}
{%- endif %})JINJA";

constexpr const char* kLlama3 = R"JINJA({{- '<|begin_of_text|>' }}
{%- for message in messages %}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %})JINJA";

// `text` as a single-quoted Jinja string literal.
std::string jinja_literal(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string plain_jinja(const std::vector<std::string>& prefix_tokens,
                        const std::string& eos_token) {
  std::string prefix;
  for (const std::string& token : prefix_tokens) prefix += token;
  std::string source;
  if (!prefix.empty()) source += "{{- " + jinja_literal(prefix) + " }}\n";
  source +=
      "{%- for message in messages %}\n"
      "{%- if message['role'] == 'assistant' %}\n"
      "{{- message['content'] + " +
      jinja_literal(eos_token) +
      " }}\n"
      "{%- else %}\n"
      "{{- message['content'] + '\\n' }}\n"
      "{%- endif %}\n"
      "{%- endfor %}";
  return source;
}

}  // namespace

std::string builtin_template_jinja(TemplateKind kind, const std::vector<std::string>& prefix_tokens,
                                   const std::string& eos_token) {
  switch (kind) {
    case TemplateKind::kChatml:
      return kChatml;
    case TemplateKind::kQwen3:
      return kQwen3;
    case TemplateKind::kLlama3:
      return kLlama3;
    case TemplateKind::kPlain:
      return plain_jinja(prefix_tokens, eos_token);
    case TemplateKind::kJinja:
      break;
  }
  fail("builtin_template_jinja: '", template_kind_name(kind), "' is not a built-in layout");
}

std::string builtin_template_jinja(TemplateKind kind, const Tokenizer& tokenizer,
                                   const TokenizerConfig& config) {
  std::string eos_token;
  if (kind == TemplateKind::kPlain) {
    const std::optional<uint32_t> eos = resolve_special_ids(tokenizer, config).eos;
    LT_CHECK(eos.has_value(),
             "chat template plain: the tokenizer has no end-of-sequence token (no eos_token in "
             "tokenizer_config.json and none of <|endoftext|>, <|end_of_text|>, </s>)");
    eos_token = tokenizer.id_to_token(*eos).value_or("");
  }
  return builtin_template_jinja(kind, config.prefix_tokens, eos_token);
}

}  // namespace lt::data
