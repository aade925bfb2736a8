// A row's chat message as a chat template reads it, and what the built-in
// layouts cannot render (chat_template.h).
#include <algorithm>
#include <array>
#include <string_view>

#include "data/chat_template.h"

namespace lt::data {

namespace {

// transformers 5's _REASONING_FIELDS, in the order it looks at them.
constexpr std::array<std::string_view, 3> kReasoningFields = {"reasoning_content", "thinking",
                                                              "reasoning"};

const jinja::Value* field(const jinja::Value& message, std::string_view key) {
  if (!message.is_object()) return nullptr;
  const auto it = message.find(key);
  return it == message.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

jinja::Value template_message(Role role, const jinja::Value& content,
                              const jinja::Value& other_fields) {
  jinja::Value message = jinja::Value::object();
  message["role"] = role_name(role);
  if (!content.is_null()) message["content"] = content;
  for (const auto& [key, value] : other_fields.items()) {
    if (!value.is_null() && key != "role" && key != "content") message[key] = value;
  }
  const jinja::Value* reasoning = nullptr;
  for (std::string_view key : kReasoningFields) {
    if ((reasoning = field(message, key)) != nullptr) break;
  }
  if (reasoning == nullptr) return message;
  // {"thinking": r, **message, "reasoning_content": r}: thinking first
  // unless the message names it, reasoning_content where the message has it.
  jinja::Value aliased = jinja::Value::object();
  aliased["thinking"] = *reasoning;
  for (const auto& [key, value] : message.items()) aliased[key] = value;
  aliased["reasoning_content"] = *reasoning;
  return aliased;
}

std::string built_in_layout_refusal(std::span<const ChatMessage> messages,
                                    const jinja::Value& tools) {
  std::string what;
  if (tools.is_array() && !tools.empty()) what = "tools";
  for (const ChatMessage& m : messages) {
    if (!what.empty()) break;
    if (m.role == Role::kTool) what = "a tool turn";
    const jinja::Value* calls = field(m.fields, "tool_calls");
    if (calls != nullptr && !(calls->is_array() && calls->empty())) what = "tool calls";
    if (std::any_of(kReasoningFields.begin(), kReasoningFields.end(),
                    [&](std::string_view key) { return field(m.fields, key) != nullptr; })) {
      what = "a separate reasoning field";
    }
  }
  if (what.empty()) return what;
  return "the row has " + what +
         ", which only the model's own chat template knows how to lay out; use it (template "
         "auto: --template auto, or data.template: auto), not a built-in layout";
}

}  // namespace lt::data
