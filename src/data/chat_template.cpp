#include "data/chat_template.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/chat_template_jinja.h"
#include "data/jinja_strings.h"
#include "data/json_fields.h"

namespace lt::data {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// eos_token / bos_token: a string, an AddedToken object {"content": ...},
// or null.
std::optional<std::string> token_field(const json& config, const JsonField& field,
                                       std::string_view key) {
  const json* value = optional_member(config, field, key);
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object()) {
    return require_string(require_member(*value, field.member(key), "content"),
                          field.member(key).member("content"));
  }
  field.member(key).fail("expected a string or an object with \"content\", found " +
                         json_type_name(*value));
}

// The named special tokens `file` sets (a token set to null is unset).
void read_named_tokens(const json& file, const JsonField& root, TokenizerConfig& config) {
  if (file.contains("eos_token")) config.eos_token = token_field(file, root, "eos_token");
  if (file.contains("bos_token")) config.bos_token = token_field(file, root, "bos_token");
  for (const char* key : {"unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!file.contains(key)) continue;
    if (auto token = token_field(file, root, key))
      config.other_special_tokens[key] = *token;
    else
      config.other_special_tokens.erase(key);
  }
}

// The tokenizer classes whose transformers 4.x tokenizers rebuild the
// post-processor from tokenizer_config.json's add_bos_token (default true)
// when they load, whatever tokenizer.json says (LlamaTokenizerFast's
// update_post_processor; the slow SentencePiece ones add it the same way).
bool bos_follows_add_bos_token(std::string_view tokenizer_class) {
  for (std::string_view name : {"LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer",
                                "CodeLlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast"}) {
    if (tokenizer_class == name) return true;
  }
  return false;
}

// An optional boolean field; absent or null gives `fallback`.
bool bool_field(const json& config, const JsonField& field, std::string_view key, bool fallback) {
  const json* value = optional_member(config, field, key);
  if (value == nullptr || value->is_null()) return fallback;
  if (!value->is_boolean())
    field.member(key).fail("expected true or false, found " + json_type_name(*value));
  return value->get<bool>();
}

// chat_template: a string, or a list of {"name", "template"} of which the
// one named "default" is what apply_chat_template uses (and "tool_use" when
// tools are given). A list without a default
// leaves `config` no template and says why in chat_template_error:
// transformers refuses it ("multiple chat templates with no default
// specified"), where taking another (a "tool_use" template) would render
// every conversation as that one.
void read_chat_template_field(const json& j, const JsonField& field, TokenizerConfig& config) {
  const json* value = optional_member(j, field, "chat_template");
  if (value == nullptr) return;
  if (value->is_string()) {
    config.chat_template = value->get<std::string>();
    return;
  }
  JsonField list_field = field.member("chat_template");
  if (!value->is_array()) {
    list_field.fail("expected a string or a list of {name, template}, found " +
                    json_type_name(*value));
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < value->size(); ++i) {
    JsonField item = list_field.element(i);
    std::string name =
        require_string(require_member((*value)[i], item, "name"), item.member("name"));
    std::string text =
        require_string(require_member((*value)[i], item, "template"), item.member("template"));
    if (name == "tool_use") {
      config.tool_use_template = text;
      config.tool_use_template_file = field.file;
    }
    if (name == "default") {
      config.chat_template = std::move(text);
      continue;
    }
    names.push_back(std::move(name));
  }
  if (names.empty() || !config.chat_template.empty()) return;
  config.chat_template_error = fmt::format(
      "{}: field \"chat_template\": a list of templates named {} and none named \"default\", "
      "the one a chat is rendered with (transformers refuses it too); add a chat_template.jinja "
      "beside it, or name a built-in layout with --template (eval, generate) or data.template "
      "(train): chatml, qwen3, llama3 or plain",
      field.file, fmt::join(names, ", "));
}

// The special tokens before "$A" in a TemplateProcessing's "single".
std::vector<std::string> template_prefix(const json& processor, const JsonField& field) {
  std::vector<std::string> prefix;
  const json& single = require_member(processor, field, "single");
  JsonField single_field = field.member("single");
  if (!single.is_array()) single_field.fail("expected a list, found " + json_type_name(single));
  for (size_t i = 0; i < single.size(); ++i) {
    JsonField item = single_field.element(i);
    if (const json* special = optional_member(single[i], item, "SpecialToken")) {
      prefix.push_back(require_string(require_member(*special, item.member("SpecialToken"), "id"),
                                      item.member("SpecialToken").member("id")));
    } else {
      break;  // {"Sequence": {"id": "A"}}: the text itself
    }
  }
  return prefix;
}

std::vector<std::string> post_processor_prefix(const json& tokenizer, const fs::path& file) {
  JsonField root{file.string(), ""};
  const json* processor = optional_member(tokenizer, root, "post_processor");
  if (processor == nullptr) return {};
  JsonField field = root.member("post_processor");
  std::string type =
      require_string(require_member(*processor, field, "type"), field.member("type"));
  if (type == "TemplateProcessing") return template_prefix(*processor, field);
  if (type == "Sequence") {
    const json& list = require_member(*processor, field, "processors");
    JsonField list_field = field.member("processors");
    if (!list.is_array()) list_field.fail("expected a list, found " + json_type_name(list));
    for (size_t i = 0; i < list.size(); ++i) {
      const json* item_type = optional_member(list[i], list_field.element(i), "type");
      if (item_type && item_type->is_string() && *item_type == "TemplateProcessing") {
        return template_prefix(list[i], list_field.element(i));
      }
    }
  }
  return {};  // ByteLevel, RobertaProcessing, ...: nothing before the text
}

std::string_view strip_newlines_front(std::string_view text) {
  while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  return text;
}

std::string_view strip_newlines_back(std::string_view text) {
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text;
}

// An assistant message's content split as Qwen3's template splits it.
struct ReasoningSplit {
  std::string_view reasoning;  // empty when the content has no "</think>"
  std::string_view answer;
};

ReasoningSplit split_reasoning(std::string_view content) {
  constexpr std::string_view kOpen = "<think>", kClose = "</think>";
  const size_t first_close = content.find(kClose);
  if (first_close == std::string_view::npos) return {{}, content};
  // Python's split(kClose)[-1] and split(kClose)[0].split(kOpen)[-1].
  std::string_view answer = content.substr(content.rfind(kClose) + kClose.size());
  std::string_view reasoning = strip_newlines_back(content.substr(0, first_close));
  if (size_t open = reasoning.rfind(kOpen); open != std::string_view::npos) {
    reasoning.remove_prefix(open + kOpen.size());
  }
  return {strip_newlines_front(reasoning), strip_newlines_front(answer)};
}

// Qwen3's last_query_index: the last user message that is not a tool
// response passed back as a user turn; the last message if there is none.
size_t last_query_index(std::span<const ChatMessage> messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& text = messages[i].content;
    const bool tool_response =
        text.starts_with("<tool_response>") && text.ends_with("</tool_response>");
    if (messages[i].role == Role::kUser && !tool_response) return i;
  }
  return messages.empty() ? 0 : messages.size() - 1;
}

// Accumulates a sample piece by piece. Text with the same label is joined
// and encoded at once; a change of label or a special token ends the run.
class SampleBuilder {
 public:
  SampleBuilder(const Tokenizer& tokenizer, bool train_on_prompt)
      : tokenizer_(tokenizer), train_on_prompt_(train_on_prompt) {}

  void text(std::string_view piece, bool trained) {
    if (piece.empty()) return;
    if (!pending_.empty() && pending_trained_ != trained) flush();
    pending_trained_ = trained;
    pending_ += piece;
  }

  void special(uint32_t id, bool trained) {
    flush();
    push(id, trained);
  }

  Sample finish() {
    flush();
    return std::move(sample_);
  }

 private:
  void push(uint32_t id, bool trained) {
    sample_.ids.push_back(static_cast<int32_t>(id));
    sample_.labels.push_back(trained || train_on_prompt_ ? static_cast<int32_t>(id) : kIgnoreLabel);
  }

  void flush() {
    if (pending_.empty()) return;
    scratch_.clear();
    tokenizer_.encode(pending_, scratch_);
    for (uint32_t id : scratch_) push(id, pending_trained_);
    pending_.clear();
  }

  const Tokenizer& tokenizer_;
  bool train_on_prompt_;
  Sample sample_;
  std::string pending_;
  bool pending_trained_ = false;
  std::vector<uint32_t> scratch_;
};

}  // namespace

std::string_view role_name(Role role) {
  switch (role) {
    case Role::kSystem:
      return "system";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
    case Role::kTool:
      return "tool";
  }
  return "?";
}

TokenizerConfig read_tokenizer_config(const fs::path& tokenizer_path) {
  TokenizerConfig config;
  std::optional<bool> add_bos_token;  // set for the classes that follow it
  bool legacy_map = true;  // no tokenizer_config.json, or one without added_tokens_decoder
  const bool is_dir = fs::is_directory(tokenizer_path);
  const fs::path dir = is_dir ? tokenizer_path : tokenizer_path.parent_path();

  const fs::path config_file = dir / "tokenizer_config.json";
  if (fs::exists(config_file)) {
    config.file = config_file;
    json j = parse_json_text(read_whole_file(config_file), config_file);
    JsonField root{config_file.string(), ""};
    if (!j.is_object()) root.fail("expected an object, found " + json_type_name(j));
    read_chat_template_field(j, root, config);
    if (!config.chat_template.empty()) config.chat_template_file = config_file;
    read_named_tokens(j, root, config);
    legacy_map = !j.contains("added_tokens_decoder");
    const json* tokenizer_class = optional_member(j, root, "tokenizer_class");
    if (tokenizer_class && tokenizer_class->is_string() &&
        bos_follows_add_bos_token(tokenizer_class->get<std::string>())) {
      add_bos_token = bool_field(j, root, "add_bos_token", true);
    }
  }
  // A config without added_tokens_decoder (older saves) takes its named
  // tokens from special_tokens_map.json where that file has them, as
  // transformers' loading does ("Legacy: read special_tokens_map.json and
  // merge into init_kwargs").
  const fs::path map_file = dir / "special_tokens_map.json";
  if (legacy_map && fs::exists(map_file)) {
    const json m = parse_json_text(read_whole_file(map_file), map_file);
    JsonField root{map_file.string(), ""};
    if (!m.is_object()) root.fail("expected an object, found " + json_type_name(m));
    read_named_tokens(m, root, config);
  }
  // transformers 5 saves the template beside the config instead, and when
  // both exist, loading takes the file's ("independent chat template files
  // take priority over template entries in the tokenizer config").
  const fs::path jinja_file = dir / "chat_template.jinja";
  if (fs::exists(jinja_file)) {
    config.chat_template = read_whole_file(jinja_file);
    config.chat_template_file = jinja_file;
    config.chat_template_error.clear();
  }
  const fs::path tool_use_file = dir / "additional_chat_templates" / "tool_use.jinja";
  if (fs::exists(tool_use_file)) {
    config.tool_use_template = read_whole_file(tool_use_file);
    config.tool_use_template_file = tool_use_file;
  }

  fs::path tokenizer_json;
  if (!is_dir && tokenizer_path.extension() == ".json" &&
      tokenizer_path.filename() != "encoder.json") {
    tokenizer_json = tokenizer_path;
  } else if (fs::exists(dir / "tokenizer.json")) {
    tokenizer_json = dir / "tokenizer.json";
  }
  if (!tokenizer_json.empty()) {
    // Only post_processor matters here: drop the vocabulary and merges while
    // parsing rather than building them (tens of MB for large vocabularies).
    json::parser_callback_t skip_model = [](int depth, json::parse_event_t event, json& parsed) {
      return !(depth == 1 && event == json::parse_event_t::key &&
               (parsed == "model" || parsed == "added_tokens"));
    };
    json j = parse_json_text(read_whole_file(tokenizer_json), tokenizer_json, skip_model);
    if (j.is_object()) config.prefix_tokens = post_processor_prefix(j, tokenizer_json);
    config.tokenizer_json = tokenizer_json;
    config.prefix_source = tokenizer_json.string() + ": field \"post_processor\"";
  }
  // As transformers 4.x loads a Llama or Gemma tokenizer: the BOS is there
  // when add_bos_token says so, with or without tokenizer.json's
  // post-processor, and also for a folder with only a tokenizer.model
  // (transformers 5 reads the post-processor alone and adds no BOS for a
  // tokenizer.model: tests/data/fixtures/bos_goldens.json has both).
  if (add_bos_token) {
    config.prefix_tokens.clear();
    if (*add_bos_token && config.bos_token) config.prefix_tokens.push_back(*config.bos_token);
    config.prefix_source = config.file.string() + ": fields \"add_bos_token\", \"bos_token\"";
  }
  return config;
}

SpecialIds resolve_special_ids(const Tokenizer& tokenizer, const TokenizerConfig& config) {
  SpecialIds ids;
  if (config.eos_token) {
    ids.eos = tokenizer.token_to_id(*config.eos_token);
    LT_CHECK(ids.eos.has_value(), config.file.string(), ": field \"eos_token\": \"",
             *config.eos_token, "\" is not a token of the tokenizer");
  } else {
    for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
      if ((ids.eos = tokenizer.token_to_id(name))) break;
    }
  }
  for (const std::string& token : config.prefix_tokens) {
    std::optional<uint32_t> id = tokenizer.token_to_id(token);
    LT_CHECK(id.has_value(), config.prefix_source, ": special token \"", token,
             "\" is not a token of the tokenizer");
    ids.prefix.push_back(*id);
  }
  return ids;
}

std::string_view template_kind_name(TemplateKind kind) {
  switch (kind) {
    case TemplateKind::kChatml:
      return "chatml";
    case TemplateKind::kQwen3:
      return "qwen3";
    case TemplateKind::kLlama3:
      return "llama3";
    case TemplateKind::kPlain:
      return "plain";
    case TemplateKind::kJinja:
      return "jinja";
  }
  return "?";
}

TemplateChoice resolve_template_kind(std::string_view name, const TokenizerConfig& config) {
  if (name == "chatml") return TemplateKind::kChatml;
  if (name == "qwen3") return TemplateKind::kQwen3;
  if (name == "llama3") return TemplateKind::kLlama3;
  if (name == "plain") return TemplateKind::kPlain;
  if (name == "auto") {
    LT_CHECK(config.chat_template_error.empty(), config.chat_template_error);
    if (config.chat_template.empty()) {
      TemplateChoice plain(TemplateKind::kPlain);
      plain.no_template_of_its_own = true;
      return plain;
    }
    const fs::path& file =
        config.chat_template_file.empty() ? config.file : config.chat_template_file;
    auto jinja = std::make_shared<JinjaChatTemplate>(
        config.chat_template, file.empty() ? fs::path("chat_template") : file, config.bos_token,
        config.eos_token, config.other_special_tokens);
    if (!config.tool_use_template.empty()) {
      jinja->set_tool_use_template(config.tool_use_template, config.tool_use_template_file);
    }
    return TemplateChoice(std::shared_ptr<const JinjaChatTemplate>(std::move(jinja)));
  }
  fail("unknown chat template \"", name, "\"; expected auto, chatml, qwen3, llama3 or plain");
}

namespace {

// The special token that closes the assistant's turn of a short probe
// conversation: what generation stops at. None when the template renders
// no special token there (or refuses the probe).
std::optional<uint32_t> jinja_turn_end(const JinjaChatTemplate& jinja, const Tokenizer& tokenizer) {
  const std::vector<ChatMessage> probe{{Role::kUser, "Hi"}, {Role::kAssistant, "Hello"}};
  try {
    const std::string text = jinja.render_text(probe, false);
    const auto ranges = jinja.trained_ranges(probe, text, tokenizer);
    if (ranges.empty()) return std::nullopt;
    const std::string_view trained = std::string_view(text).substr(0, ranges.back().second);
    const AddedToken* last = nullptr;
    for (const AddedToken& token : tokenizer.added_tokens()) {
      if (token.special && trained.ends_with(token.content) &&
          (last == nullptr || token.content.size() > last->content.size())) {
        last = &token;
      }
    }
    if (last != nullptr) return last->id;
  } catch (const Error&) {
  }
  return std::nullopt;
}

}  // namespace

ChatTemplate::ChatTemplate(const TemplateChoice& choice, const Tokenizer& tokenizer,
                           const SpecialIds& special)
    : kind_(choice.kind),
      tokenizer_(&tokenizer),
      special_(special),
      jinja_(choice.jinja),
      no_template_of_its_own_(choice.no_template_of_its_own) {
  switch (kind_) {
    case TemplateKind::kQwen3:
      think_start_ = require_token("<think>");
      think_end_ = require_token("</think>");
      [[fallthrough]];  // and ChatML's tokens
    case TemplateKind::kChatml:
      im_start_ = require_token("<|im_start|>");
      im_end_ = require_token("<|im_end|>");
      turn_end_ = im_end_;
      break;
    case TemplateKind::kLlama3:
      begin_of_text_ = require_token("<|begin_of_text|>");
      start_header_ = require_token("<|start_header_id|>");
      end_header_ = require_token("<|end_header_id|>");
      eot_ = require_token("<|eot_id|>");
      turn_end_ = eot_;
      break;
    case TemplateKind::kPlain:
      LT_CHECK(special_.eos.has_value(),
               "chat template plain: the tokenizer has no end-of-sequence token (no eos_token in "
               "tokenizer_config.json and none of <|endoftext|>, <|end_of_text|>, </s>)");
      turn_end_ = special_.eos;
      break;
    case TemplateKind::kJinja:
      LT_CHECK(jinja_ != nullptr, "chat template jinja: no template was given");
      turn_end_ = jinja_turn_end(*jinja_, tokenizer);
      break;
  }
}

uint32_t ChatTemplate::require_token(std::string_view token) const {
  std::optional<uint32_t> id = tokenizer_->token_to_id(token);
  LT_CHECK(id.has_value(), "chat template ", name(), " needs the special token ", token,
           ", which the tokenizer does not have (its model was not trained in that layout: "
           "the template auto takes the tokenizer's own, plain needs no special token)");
  return *id;
}

Sample ChatTemplate::render(std::span<const ChatMessage> messages, bool train_on_prompt,
                            const jinja::Value& tools) const {
  if (kind_ == TemplateKind::kJinja) {
    return jinja_->render(messages, *tokenizer_, train_on_prompt, tools);
  }
  if (std::string refusal = built_in_layout_refusal(messages, tools); !refusal.empty()) {
    if (no_template_of_its_own_) {
      refusal = refusal.substr(0, refusal.find("; ")) +
                "; the tokenizer has no chat template of its own (tokenizer_config.json's "
                "chat_template or chat_template.jinja), so the plain layout stood in: add the "
                "model's chat template beside its tokenizer";
    }
    throw jinja::TemplateRaised(refusal);
  }
  SampleBuilder out(*tokenizer_, train_on_prompt);
  switch (kind_) {
    case TemplateKind::kChatml:
      for (const ChatMessage& m : messages) {
        const bool trained = m.role == Role::kAssistant;
        out.special(im_start_, false);
        out.text(role_name(m.role), false);
        out.text("\n", false);
        out.text(m.content, trained);
        out.special(im_end_, trained);
        out.text("\n", false);
      }
      break;
    case TemplateKind::kQwen3: {
      const size_t last_query = last_query_index(messages);
      for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        out.special(im_start_, false);
        out.text(role_name(m.role), false);
        out.text("\n", false);
        if (m.role != Role::kAssistant) {
          out.text(m.content, false);
          out.special(im_end_, false);
          out.text("\n", false);
          continue;
        }
        const ReasoningSplit split = split_reasoning(m.content);
        const bool think_block =
            i > last_query && (i + 1 == messages.size() || !split.reasoning.empty());
        if (think_block) {
          // Masked when empty: see the header (the generation prompt).
          const bool trained = !split.reasoning.empty();
          out.special(think_start_, trained);
          out.text("\n", trained);
          out.text(split.reasoning, trained);  // split_reasoning stripped both ends
          out.text("\n", trained);
          out.special(think_end_, trained);
          out.text("\n\n", trained);
        }
        // With a think block the answer loses its leading newlines even when
        // the content had no "</think>" to split at.
        out.text(think_block ? strip_newlines_front(split.answer) : split.answer, true);
        out.special(im_end_, true);
        out.text("\n", false);
      }
      break;
    }
    case TemplateKind::kLlama3:
      out.special(begin_of_text_, false);
      for (const ChatMessage& m : messages) {
        const bool trained = m.role == Role::kAssistant;
        out.special(start_header_, false);
        out.text(role_name(m.role), false);
        out.special(end_header_, false);
        out.text("\n\n", false);
        out.text(jinja::strip(m.content, std::nullopt, jinja::StripSide::kBoth), trained);
        out.special(eot_, trained);
      }
      break;
    case TemplateKind::kJinja:
      break;  // rendered above
    case TemplateKind::kPlain:
      for (uint32_t id : special_.prefix) out.special(id, false);
      for (const ChatMessage& m : messages) {
        if (m.role == Role::kAssistant) {
          out.text(m.content, true);
          out.special(*special_.eos, true);
        } else {
          out.text(m.content, false);
          out.text("\n", false);
        }
      }
      break;
  }
  return out.finish();
}

}  // namespace lt::data
