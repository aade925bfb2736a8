#pragma once
// A model's own chat template (its Jinja chat_template) turned into
// training samples: the ids are those of transformers'
// apply_chat_template(messages, tokenize=True) (the whole rendered text
// encoded at once, add_special_tokens=False), so what is trained is what the
// model reads at inference.
//
// Which tokens are trained (labels = ids; every other label is -100). For
// each assistant message i:
//   1. Where its output lands: the conversation is rendered again with
//      message i's content replaced by a one-character stand-in (a control
//      character the message does not hold, U+0001 first)
//      and what else the model writes in that turn removed (tool_calls,
//      reasoning_content and its aliases); the text that differs between
//      the two renderings is the turn's output as the template wrote it
//      (trimmed, reasoning split off, tool calls laid out, ...). A
//      boundary that falls inside a special token moves to its edge: a
//      call turn's "<|eom_id|>" against the stand-in's "<|eot_id|>" shares
//      "_id|>", and that token then ends the turn (step 3 is skipped).
//      A template that refuses the conversation without the turn's calls
//      (Mistral's alternation check skips turns with calls) gets a stand-in
//      that keeps the calls, their ids and types, with each call's name and
//      arguments replaced; the difference is then only inside the calls, and
//      steps 2 and 3 widen it: with no generation prompt the turn starts at
//      the special token nearest before the calls ([TOOL_CALLS]), and it ends
//      through the first special token after them, ids and brackets between.
//   2. Where the turn starts: at the end of the generation prompt before
//      the content, i.e. what add_generation_prompt=True adds after
//      messages[:i] (and, for templates that read it, what it adds with
//      enable_thinking=false: Qwen3's empty think block). Of those, the
//      occurrence ending nearest the content counts; with none the turn
//      starts at the content, and for templates that ignore
//      add_generation_prompt (Llama 2's, Mistral's) at the spaces between
//      a special token and the content ("[/INST] 7": " 7", which the model
//      writes after a prompt ending at "[/INST]"; a newline there is
//      layout and is not trained). So
//      "<think>\nreasoning\n</think>\n\n" written by the model is trained,
//      and an empty think block the prompt already holds is not.
//   3. Where it ends: after the content, past whitespace, through the
//      special token that follows (<|im_end|>, <|eot_id|>, </s>,
//      <end_of_turn>, <|end|>, ...): the token the model must learn to stop
//      with. Whitespace after that token ("\n" before the next turn) and
//      anything else the template adds (Phi-3's final eos) is not trained.
// A token is trained when any of its characters is: " Hello" after
// Mistral's "[/INST]" is one token, trained, though the template wrote the
// space. Token boundaries come from encoding the text up to each label
// boundary (the tokenizer exposes no offsets): first the pieces between
// boundaries (the ids equal the whole text's in all but rare cases), else,
// per boundary, the common prefix of the prefix's ids and the whole text's.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "data/batching.h"
#include "data/jinja_template.h"
#include "data/tokenizer.h"

namespace lt::data {

struct ChatMessage;

class JinjaChatTemplate {
 public:
  // A template the renderer cannot parse is an lt::Error naming `file` and
  // the line, and suggesting --template / data.template.
  // The tokens are passed to the template as transformers passes its
  // special_tokens_map: bos_token, eos_token and `other_tokens` by name.
  JinjaChatTemplate(const std::string& source, const std::filesystem::path& file,
                    std::optional<std::string> bos_token, std::optional<std::string> eos_token,
                    std::map<std::string, std::string> other_tokens = {});

  // What apply_chat_template(messages, tools=tools, tokenize=False,
  // add_generation_prompt=...) gives; `tools` is a list or null.
  std::string render_text(std::span<const ChatMessage> messages, bool add_generation_prompt,
                          bool disable_thinking = false, const jinja::Value& tools = nullptr) const;

  // Trained character ranges [begin, end) of render_text(messages, false,
  // false, tools), in order (see the header).
  std::vector<std::pair<size_t, size_t>> trained_ranges(std::span<const ChatMessage> messages,
                                                        const std::string& text,
                                                        const Tokenizer& tokenizer,
                                                        const jinja::Value& tools = nullptr) const;

  Sample render(std::span<const ChatMessage> messages, const Tokenizer& tokenizer,
                bool train_on_prompt, const jinja::Value& tools = nullptr) const;

  const std::filesystem::path& file() const { return file_; }

  // The template transformers renders with when tools are given (a
  // tokenizer's "tool_use" template); parse errors as the constructor's.
  void set_tool_use_template(const std::string& source, const std::filesystem::path& file);

 private:
  static jinja::Template parse(const std::string& source, const std::filesystem::path& file);

  jinja::Template template_;
  std::optional<jinja::Template> tool_use_;
  std::filesystem::path file_;
  bool reads_enable_thinking_;  // the source mentions it (Qwen3's does)
  std::optional<std::string> bos_token_, eos_token_;
  std::map<std::string, std::string> other_tokens_;
};

}  // namespace lt::data
