#pragma once
// The built-in chat layouts (chat_template.h) as Jinja chat templates, for
// the folders a run saves: transformers' apply_chat_template reads only a
// folder's Jinja template, so a checkpoint trained in a built-in layout
// carries that layout as one, and whoever prompts it with transformers gets
// the layout that was trained rather than the tokenizer's own.
//
// What each renders, with tokenize=False, is the text whose tokens the
// built-in renderer gives (the special tokens written as their strings):
//   - a conversation, with add_generation_prompt=False: ChatTemplate::render;
//   - a prompt, with add_generation_prompt=True: data::PromptRenderer::chat
//     (the ids before the first trained token of an empty assistant turn).
//     For qwen3 this holds with enable_thinking=False, which puts Qwen3's
//     empty think block in the prompt; left out (Qwen3's default), the
//     prompt ends at "<|im_start|>assistant\n" and the model may think
//     first, as with Qwen3's own template, which this one renders alike for
//     system, user and assistant messages.
#include <string>
#include <vector>

#include "data/chat_template.h"

namespace lt::data {

// The Jinja source of built-in layout `kind` (not kJinja, an lt::Error).
// plain depends on the tokenizer: its prefix tokens (TokenizerConfig::
// prefix_tokens) and its EOS token (as resolve_special_ids chooses it) are
// written into the template as text.
std::string builtin_template_jinja(TemplateKind kind, const std::vector<std::string>& prefix_tokens,
                                   const std::string& eos_token);

// The same for `tokenizer` and the files beside it (`config`); plain
// without an EOS token is an lt::Error, as ChatTemplate's.
std::string builtin_template_jinja(TemplateKind kind, const Tokenizer& tokenizer,
                                   const TokenizerConfig& config);

}  // namespace lt::data
