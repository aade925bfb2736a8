#include "data/chat_template_jinja.h"

#include <algorithm>

#include "core/error.h"
#include "data/chat_template.h"

namespace lt::data {

namespace {

// Whether `c` is in any string of `v` (its keys too).
bool holds_char(const jinja::Value& v, char c) {
  if (v.is_string()) return v.get_ref<const std::string&>().find(c) != std::string::npos;
  if (v.is_array())
    return std::any_of(v.begin(), v.end(), [&](const jinja::Value& e) { return holds_char(e, c); });
  if (!v.is_object()) return false;
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it.key().find(c) != std::string::npos || holds_char(it.value(), c)) return true;
  return false;
}

// Stands in for an assistant's content to find where the content lands: a
// control character no template trims, splits at or tests for (not one of
// Python's whitespace: 0x09-0x0D, 0x1C-0x1F), and one the message does not
// hold: a reply of U+0001 alone rendered as its stand-in did, and trained
// nothing.
std::string stand_in_text(const ChatMessage& m) {
  for (char c = 0x01; c < 0x1C; ++c) {
    if (c >= 0x09 && c <= 0x0D) continue;
    if (m.content.find(c) == std::string::npos && !holds_char(m.fields, c))
      return std::string(1, c);
  }
  return "\x01";  // a message holding all 22 of them: the first, as before
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// The fields of a message that the model writes, besides its content.
constexpr std::string_view kOutputFields[] = {"tool_calls", "function_call", "reasoning_content",
                                              "thinking", "reasoning"};

jinja::Value messages_value(std::span<const ChatMessage> messages) {
  jinja::Value list = jinja::Value::array();
  for (const ChatMessage& m : messages) {
    if (m.fields.is_object()) {
      list.push_back(m.fields);
      continue;
    }
    jinja::Value message = jinja::Value::object();
    message["role"] = role_name(m.role);
    message["content"] = m.content;
    list.push_back(std::move(message));
  }
  return list;
}

// `m` with its output replaced by the stand-in: the content, and no tool
// calls or reasoning.
ChatMessage stand_in_for(const ChatMessage& m) {
  const std::string text = stand_in_text(m);
  ChatMessage stand_in{m.role, text, nullptr};
  if (m.fields.is_object()) {
    stand_in.fields = m.fields;
    stand_in.fields["content"] = text;
    for (std::string_view key : kOutputFields) stand_in.fields.erase(std::string(key));
  }
  return stand_in;
}

// `m` with its content replaced by the stand-in and its tool calls kept
// (their number, ids and types) but each call's name and arguments replaced:
// for templates that treat a turn with calls apart (Mistral's alternation
// check skips it), which refuse the conversation when the calls are gone.
// None when `m` calls no tool.
std::optional<ChatMessage> calls_stand_in_for(const ChatMessage& m) {
  if (!m.fields.is_object()) return std::nullopt;
  const auto calls = m.fields.find("tool_calls");
  if (calls == m.fields.end() || !calls->is_array() || calls->empty()) return std::nullopt;
  const std::string text = stand_in_text(m);
  ChatMessage stand_in{m.role, text, m.fields};
  if (stand_in.fields.contains("content")) stand_in.fields["content"] = text;
  for (std::string_view key : kOutputFields) {
    if (key != "tool_calls") stand_in.fields.erase(std::string(key));
  }
  for (jinja::Value& call : stand_in.fields["tool_calls"]) {
    if (!call.is_object()) continue;
    const bool nested = call.contains("function") && call["function"].is_object();
    jinja::Value& function = nested ? call["function"] : call;
    function["name"] = text;
    function["arguments"] = jinja::Value::object();
  }
  return stand_in;
}

// [begin, end) of `a` that differs from `b` (common prefix and suffix cut).
std::pair<size_t, size_t> differing_range(std::string_view a, std::string_view b) {
  size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  return {prefix, a.size() - suffix};
}

// The special token starting at text[pos], if any (the longest).
size_t special_token_at(const Tokenizer& tokenizer, std::string_view text, size_t pos) {
  size_t best = 0;
  for (const AddedToken& token : tokenizer.added_tokens()) {
    if (token.special && token.content.size() > best &&
        text.substr(pos).starts_with(token.content)) {
      best = token.content.size();
    }
  }
  return best;
}

// [start, end) of a special token of `text` that `pos` falls strictly
// inside, if any: a boundary there is moved to the token's edge, since a
// stand-in's "<|eot_id|>" shares "_id|>" with the "<|eom_id|>" it stands
// beside and would cut it.
std::optional<std::pair<size_t, size_t>> special_token_around(const Tokenizer& tokenizer,
                                                              std::string_view text, size_t pos) {
  size_t longest = 0;
  for (const AddedToken& token : tokenizer.added_tokens()) {
    if (token.special) longest = std::max(longest, token.content.size());
  }
  for (size_t start = pos > longest ? pos - longest : 0; start < pos; ++start) {
    const size_t length = special_token_at(tokenizer, text, start);
    if (length > 0 && start + length > pos) return std::make_pair(start, start + length);
  }
  return std::nullopt;
}

size_t common_prefix(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Per token of `ids` (the encoding of `text`), whether it is trained: it
// overlaps one of `ranges`.
std::vector<bool> trained_tokens(const Tokenizer& tokenizer, const std::string& text,
                                 const std::vector<uint32_t>& ids,
                                 const std::vector<std::pair<size_t, size_t>>& ranges) {
  std::vector<bool> trained(ids.size(), false);
  if (ranges.empty()) return trained;
  // Fast path: encode the pieces between label boundaries; when they join
  // into the whole text's ids, each piece's tokens take its label.
  std::vector<uint32_t> joined, piece;
  std::vector<bool> piece_labels;
  size_t pos = 0;
  auto add_piece = [&](size_t end, bool label) {
    if (end <= pos) return;
    piece.clear();
    tokenizer.encode(std::string_view(text).substr(pos, end - pos), piece);
    joined.insert(joined.end(), piece.begin(), piece.end());
    piece_labels.insert(piece_labels.end(), piece.size(), label);
    pos = end;
  };
  for (const auto& [begin, end] : ranges) {
    add_piece(begin, false);
    add_piece(end, true);
  }
  add_piece(text.size(), false);
  if (joined == ids) return piece_labels;

  // Slow path: the tokens wholly before each boundary are the common prefix
  // of the prefix's ids and the whole text's; a token across a boundary
  // overlaps the range, so it is trained.
  auto tokens_before = [&](size_t boundary, bool* clean) {
    std::vector<uint32_t> prefix = tokenizer.encode(std::string_view(text).substr(0, boundary));
    const size_t n = common_prefix(prefix, ids);
    *clean = n == prefix.size();
    return n;
  };
  for (const auto& [begin, end] : ranges) {
    bool clean = false;
    const size_t first = tokens_before(begin, &clean);
    size_t last = tokens_before(end, &clean);
    if (!clean) ++last;  // the token across `end` holds trained characters
    for (size_t k = first; k < std::min(last, ids.size()); ++k) trained[k] = true;
  }
  return trained;
}

}  // namespace

JinjaChatTemplate::JinjaChatTemplate(const std::string& source, const std::filesystem::path& file,
                                     std::optional<std::string> bos_token,
                                     std::optional<std::string> eos_token,
                                     std::map<std::string, std::string> other_tokens)
    : template_(parse(source, file)),
      file_(file),
      reads_enable_thinking_(source.find("enable_thinking") != std::string::npos),
      bos_token_(std::move(bos_token)),
      eos_token_(std::move(eos_token)),
      other_tokens_(std::move(other_tokens)) {}

jinja::Template JinjaChatTemplate::parse(const std::string& source,
                                         const std::filesystem::path& file) {
  try {
    return jinja::Template(source, file.string());
  } catch (const Error& e) {
    // "FILE:N:" counts lines of the template's text: in a JSON file, which
    // holds it as one string, line N of the file is another line.
    std::string what = e.what();
    const std::string prefix = file.string() + ":";
    const size_t colon =
        what.starts_with(prefix) ? what.find(':', prefix.size()) : std::string::npos;
    const std::string line =
        colon == std::string::npos ? "" : what.substr(prefix.size(), colon - prefix.size());
    if (file.extension() == ".json" && !line.empty() &&
        std::all_of(line.begin(), line.end(), [](char c) { return c >= '0' && c <= '9'; }))
      what = file.string() + ": the chat template's line " + line +
             " (of its text, not of the file):" + what.substr(colon + 1);
    fail(what,
         "; the chat template cannot be rendered here: name a built-in layout with "
         "--template (eval, generate) or data.template (train): chatml, qwen3, llama3 or plain");
  }
}

void JinjaChatTemplate::set_tool_use_template(const std::string& source,
                                              const std::filesystem::path& file) {
  tool_use_.emplace(parse(source, file));
  reads_enable_thinking_ =
      reads_enable_thinking_ || source.find("enable_thinking") != std::string::npos;
}

std::string JinjaChatTemplate::render_text(std::span<const ChatMessage> messages,
                                           bool add_generation_prompt, bool disable_thinking,
                                           const jinja::Value& tools) const {
  // What transformers passes: the messages, tools, documents (None),
  // add_generation_prompt and the tokenizer's named special tokens.
  jinja::Value variables = jinja::Value::object();
  variables["messages"] = messages_value(messages);
  variables["add_generation_prompt"] = add_generation_prompt;
  variables["tools"] = tools;
  variables["documents"] = nullptr;
  if (bos_token_) variables["bos_token"] = *bos_token_;
  if (eos_token_) variables["eos_token"] = *eos_token_;
  for (const auto& [name, token] : other_tokens_) variables[name] = token;
  if (disable_thinking) variables["enable_thinking"] = false;
  try {
    // transformers' get_chat_template: "tool_use" whenever tools is not None.
    const jinja::Template& chosen = !tools.is_null() && tool_use_ ? *tool_use_ : template_;
    return chosen.render(std::move(variables));
  } catch (const jinja::TemplateRaised&) {
    throw;  // the template refusing these messages: the row's fault, named by the caller
  } catch (const Error& e) {
    // Failing on these messages (Qwen3's template looks for "</think>" in
    // an absent content): this row is refused, as transformers would fail
    // on it; a template that fails on every row leaves no sample, and the
    // load's error quotes this.
    const bool lacks_content = std::any_of(messages.begin(), messages.end(), [](const auto& m) {
      return m.fields.is_object() && !m.fields.contains("content");
    });
    if (lacks_content) {
      throw jinja::TemplateRaised(std::string(e.what()) +
                                  "; the row has a message without \"content\" (null or "
                                  "absent) and this template may read it: write \"content\": \"\"");
    }
    if (!built_in_layout_refusal(messages, tools).empty()) throw jinja::TemplateRaised(e.what());
    throw jinja::TemplateRaised(
        std::string(e.what()) +
        "; to train in a built-in layout instead, name it with --template (eval, generate) or "
        "data.template (train): chatml, qwen3, llama3 or plain");
  }
}

std::vector<std::pair<size_t, size_t>> JinjaChatTemplate::trained_ranges(
    std::span<const ChatMessage> messages, const std::string& text, const Tokenizer& tokenizer,
    const jinja::Value& tools) const {
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t previous_end = 0;
  std::vector<ChatMessage> stand_in(messages.begin(), messages.end());
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != Role::kAssistant) continue;
    stand_in[i] = stand_in_for(messages[i]);
    std::string other;
    bool calls_kept = false;  // the calls' stand-in, whose bounds step 2 and 3 widen
    try {
      other = render_text(stand_in, false, false, tools);
    } catch (const Error&) {
      std::optional<ChatMessage> kept = calls_stand_in_for(messages[i]);
      if (!kept) throw;
      stand_in[i] = std::move(*kept);
      other = render_text(stand_in, false, false, tools);
      calls_kept = true;
    }
    stand_in[i] = messages[i];
    if (other == text) continue;  // the template does not show this message
    auto [content_begin, content_end] = differing_range(text, other);
    if (auto token = special_token_around(tokenizer, text, content_begin)) {
      content_begin = token->first;
    }
    // The output's end cut inside a special token: that token ends the
    // turn (<|eom_id|> after a call where the stand-in has <|eot_id|>).
    const auto end_token = special_token_around(tokenizer, text, content_end);
    if (end_token) content_end = end_token->second;
    if (content_begin < previous_end) continue;

    // 2. The generation prompt nearest before the content.
    size_t begin = content_begin;
    size_t best_end = 0;
    bool no_generation_prompt = false;  // add_generation_prompt adds nothing here
    const auto before = messages.subspan(0, i);
    std::string plain;
    bool prefix_renders = true;
    try {
      plain = render_text(before, false, false, tools);
    } catch (const Error&) {
      prefix_renders = false;  // a template that refuses this prefix (no user turn yet)
    }
    for (bool disable_thinking : {false, true}) {
      if (!prefix_renders) break;
      // A template that never reads enable_thinking renders the same prompt.
      if (disable_thinking && !reads_enable_thinking_) break;
      std::string prompted;
      try {
        prompted = render_text(before, true, disable_thinking, tools);
      } catch (const Error&) {
        continue;
      }
      if (prompted == plain) no_generation_prompt = true;
      if (!prompted.starts_with(plain) || prompted.size() == plain.size()) continue;
      const std::string_view prompt = std::string_view(prompted).substr(plain.size());
      const std::string_view window =
          std::string_view(text).substr(previous_end, content_begin - previous_end);
      const size_t at = window.rfind(prompt);
      if (at == std::string_view::npos) continue;
      const size_t end = previous_end + at + prompt.size();
      if (end > best_end) best_end = end;
    }
    if (best_end > 0) begin = best_end;
    // With no generation prompt at all (Mistral's, Llama 2's templates),
    // the space the template puts between a special token and the content
    // is the model's to write, as word-initial spaces are: "[/TOOL_RESULTS]
    // 18" trains " 18". A newline there is layout (Phi-3-medium's user turn
    // ends "<|assistant|>\n"), and stays the prompt's.
    size_t blank = begin;
    while (no_generation_prompt && blank > previous_end && text[blank - 1] == ' ') --blank;
    if (blank > 0 && blank < begin) {
      const auto token = special_token_around(tokenizer, text, blank - 1);
      if (token && token->second == blank) begin = blank;
    }
    // The calls' stand-in differs from them only inside the calls; with no
    // generation prompt to start at, the turn starts at the special token
    // nearest before them (Mistral's [TOOL_CALLS]).
    for (size_t p = begin; calls_kept && best_end == 0 && p-- > previous_end;) {
      const size_t length = special_token_at(tokenizer, text, p);
      if (length > 0 && p + length <= content_begin) {
        begin = p;
        break;
      }
    }

    // 3. Through the special token after the content (for the calls'
    // stand-in, the first one after the calls, past their ids and brackets).
    size_t end = content_end;
    size_t after = content_end;
    while (after < text.size() && (is_space(text[after]) ||
                                   (calls_kept && special_token_at(tokenizer, text, after) == 0))) {
      ++after;
    }
    if (after < text.size() && !end_token) {
      if (size_t length = special_token_at(tokenizer, text, after)) end = after + length;
    }
    ranges.emplace_back(begin, end);
    previous_end = end;
  }
  return ranges;
}

Sample JinjaChatTemplate::render(std::span<const ChatMessage> messages, const Tokenizer& tokenizer,
                                 bool train_on_prompt, const jinja::Value& tools) const {
  const std::string text = render_text(messages, false, false, tools);
  const std::vector<uint32_t> ids = tokenizer.encode(text);
  Sample sample;
  sample.ids.assign(ids.begin(), ids.end());
  if (train_on_prompt) {
    sample.labels = sample.ids;
    return sample;
  }
  const std::vector<bool> trained =
      trained_tokens(tokenizer, text, ids, trained_ranges(messages, text, tokenizer, tools));
  sample.labels.resize(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    sample.labels[k] = trained[k] ? static_cast<int32_t>(ids[k]) : kIgnoreLabel;
  }
  return sample;
}

}  // namespace lt::data
