#pragma once
// The chat formats' rows as conversations (dataset.h says which fields each
// reads): a problem is a rows::RowError naming the field.
#include <filesystem>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/dataset_rows.h"

namespace lt::data::rows {

// A system turn from the row's "system" (when not empty), the prompt as the
// user's turn, the response as the assistant's.
std::vector<ChatMessage> single_turn(const json& row, std::string prompt, std::string response);
std::vector<ChatMessage> alpaca_messages(const json& row);
// "conversations" (ShareGPT's from/value) or "messages" (role/content).
// Training needs an assistant turn and no empty answer; prompts for
// generation and evaluation need neither (`for_prompts`).
std::vector<ChatMessage> sharegpt_messages(const json& row, bool for_prompts = false);
// The row's "tools": a list of objects (JSON schemas), or a string holding
// one (as many datasets store it); null when absent.
json tools_field(const json& row);

// A file of tools (generate --tools): a JSON list of schemas, or an object
// whose "tools" is one. Errors are lt::Errors naming the file and field.
json read_tools_file(const std::filesystem::path& file);

}  // namespace lt::data::rows
