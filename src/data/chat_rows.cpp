#include "data/chat_rows.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "core/json_brief.h"
#include "data/json_fields.h"

namespace lt::data::rows {

namespace {

std::optional<Role> parse_role(std::string_view name) {
  if (name == "system") return Role::kSystem;
  if (name == "human" || name == "user") return Role::kUser;
  if (name == "gpt" || name == "assistant") return Role::kAssistant;
  if (name == "tool" || name == "observation") return Role::kTool;  // LLaMA-Factory: observation
  return std::nullopt;
}

// JSON written inside a row's string (a function call, a tools list),
// parsed as rows are (parse_row: not built past kMaxRowDepth); a problem is
// `where`'s, called `what`.
json parse_string_field(const std::string& text, const std::string& where, const char* what) {
  try {
    return parse_row(text);
  } catch (const json::parse_error&) {
    row_fail(where, std::string(what) + " that is not valid JSON");
  } catch (const RowError& e) {
    row_fail(where, std::string(what) + " that " + e.what);
  }
}

// LLaMA-Factory's "function_call" turn: its value, a JSON object {"name",
// "arguments"} or a list of them, as the assistant's OpenAI-style tool calls.
ChatMessage function_call_message(const std::string& value, const std::string& where) {
  json calls = parse_string_field(value, where, "a function call");
  if (calls.is_object()) calls = json::array({calls});
  if (!calls.is_array() || calls.empty()) {
    row_fail(where, "expected a function call {\"name\", \"arguments\"} or a list of them");
  }
  json tool_calls = json::array();
  for (const json& call : calls) {
    if (!call.is_object() || !call.contains("name")) {
      row_fail(where, "a function call without a \"name\": " + brief_json(call));
    }
    tool_calls.push_back({{"type", "function"}, {"function", call}});
  }
  return {Role::kAssistant, "",
          template_message(Role::kAssistant, "", {{"tool_calls", tool_calls}})};
}

// One turn of "conversations" (ShareGPT's from/value) or "messages"
// (role/content); either list may use the other's names.
ChatMessage turn_message(const json& turn, const std::string& where, bool sharegpt_names,
                         bool require_answer) {
  if (!turn.is_object())
    row_fail(where, std::string("expected an object, found ") + turn.type_name());
  std::string role_key = sharegpt_names ? "from" : "role";
  std::string content_key = sharegpt_names ? "value" : "content";
  if (!member(turn, role_key) && member(turn, sharegpt_names ? "role" : "from")) {
    role_key = sharegpt_names ? "role" : "from";
  }
  if (!member(turn, content_key) && member(turn, sharegpt_names ? "content" : "value")) {
    content_key = sharegpt_names ? "content" : "value";
  }
  const std::string role_text = string_field(turn, role_key, where + "." + role_key);
  if (role_text == "function_call") {
    return function_call_message(string_field(turn, content_key, where + "." + content_key),
                                 where + "." + content_key);
  }
  std::optional<Role> role = parse_role(role_text);
  if (!role) {
    row_fail(where + "." + role_key,
             "unknown role \"" + role_text +
                 "\"; expected system, human/user, gpt/assistant, tool/observation or "
                 "function_call");
  }
  // An assistant turn that calls tools may have no content (OpenAI writes
  // null).
  const json* calls = member(turn, "tool_calls");
  if (calls != nullptr &&
      !(calls->is_array() &&
        std::all_of(calls->begin(), calls->end(), [](const json& c) { return c.is_object(); }))) {
    row_fail(where + ".tool_calls",
             "expected a list of calls ({\"type\": \"function\", \"function\": {\"name\", "
             "\"arguments\"}}), found " +
                 brief_json(*calls));
  }
  const bool calls_tools =
      *role == Role::kAssistant && calls != nullptr && !(calls->is_array() && calls->empty());
  ChatMessage message{*role,
                      calls_tools && member(turn, content_key) == nullptr
                          ? std::string()
                          : string_field(turn, content_key, where + "." + content_key),
                      nullptr};
  if (require_answer && *role == Role::kAssistant && is_blank(message.content) && !calls_tools) {
    row_fail(where + "." + content_key, "empty response");
  }
  json others = turn;
  others.erase(role_key);
  others.erase(content_key);
  if (!others.empty()) {  // fields beyond role and content, for the model's own template
    message.fields = template_message(
        *role, member(turn, content_key) ? json(message.content) : json(nullptr), others);
  }
  return message;
}

}  // namespace

std::vector<ChatMessage> single_turn(const json& row, std::string prompt, std::string response) {
  std::vector<ChatMessage> messages;
  std::string system = optional_string_field(row, "system");
  if (!system.empty()) messages.push_back({Role::kSystem, std::move(system)});
  messages.push_back({Role::kUser, std::move(prompt)});
  messages.push_back({Role::kAssistant, std::move(response)});
  return messages;
}

std::vector<ChatMessage> alpaca_messages(const json& row) {
  std::string prompt = string_field(row, "instruction", "instruction");
  std::string input = optional_string_field(row, "input");
  if (!input.empty()) prompt += "\n" + input;
  return single_turn(row, std::move(prompt), response_field(row, "output", "output"));
}

json tools_field(const json& row) {
  const json* tools = member(row, "tools");
  if (tools == nullptr) return nullptr;
  json list = *tools;
  if (tools->is_string()) {
    // "" (LLaMA-Factory's rows without tools) and "null" are no tools.
    if (is_blank(tools->get<std::string>())) return nullptr;
    list = parse_string_field(tools->get<std::string>(), "tools", "a string");
    if (list.is_null()) return nullptr;
  }
  if (!list.is_array())
    row_fail("tools", std::string("expected a list, found ") + list.type_name());
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_object()) {
      row_fail("tools[" + std::to_string(i) + "]",
               std::string("expected an object (a JSON schema), found ") + list[i].type_name());
    }
  }
  return list;
}

json read_tools_file(const std::filesystem::path& file) {
  json value;
  try {
    value = parse_row(read_whole_file(file));
  } catch (const json::parse_error& e) {
    fail(file.string(), ": not valid JSON (", e.what(), ")");
  } catch (const RowError& e) {
    fail(file.string(), ": ", e.what);
  }
  // Either form: the list itself, or an object holding it as "tools". An
  // object without it was reported as a "tools" field the file lacks.
  // (A string holding the list, as datasets store tools, is read as the
  // field is.)
  if (!value.is_array() && !value.is_string() && !(value.is_object() && value.contains("tools"))) {
    fail(file.string(), ": expected a list of tools, or an object with a \"tools\" list; found ",
         value.is_object() ? "an object without \"tools\"" : value.type_name());
  }
  if (!value.is_object()) value = json{{"tools", std::move(value)}};
  try {
    json tools = tools_field(value);
    LT_CHECK(!tools.is_null(), file.string(), ": no tools in it");
    return tools;
  } catch (const RowError& e) {
    fail(file.string(), ": field \"", e.field, "\": ", e.what);
  }
}

std::vector<ChatMessage> sharegpt_messages(const json& row, bool for_prompts) {
  const std::string key = member(row, "conversations") ? "conversations" : "messages";
  const json* turns = member(row, key);
  if (turns == nullptr) row_fail("conversations", "missing (nor is there \"messages\")");
  if (!turns->is_array())
    row_fail(key, std::string("expected a list, found ") + turns->type_name());
  std::vector<ChatMessage> messages;
  // LLaMA-Factory's ShareGPT rows put the system prompt beside the turns.
  std::string system = optional_string_field(row, "system");
  if (!system.empty()) messages.emplace_back(Role::kSystem, system);
  bool has_assistant = false;
  for (size_t i = 0; i < turns->size(); ++i) {
    const std::string where = key + "[" + std::to_string(i) + "]";
    ChatMessage message = turn_message((*turns)[i], where, key == "conversations", !for_prompts);
    if (message.role == Role::kSystem && !system.empty()) {
      row_fail(where, "a system turn beside the row's \"system\" field; keep one of them");
    }
    has_assistant = has_assistant || message.role == Role::kAssistant;
    messages.push_back(std::move(message));
  }
  if (!has_assistant && !for_prompts) row_fail(key, "no assistant turn to train on");
  return messages;
}

}  // namespace lt::data::rows
