#pragma once
// Reading a dataset's JSON rows (dataset.cpp, chat_rows.cpp, and the
// prompts of prompt_rows.cpp): a problem with one row is a RowError naming
// the field, which the loader reports with the row's line and skips.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <iterator>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/json_brief.h"
#include "data/chat_template.h"

namespace lt::data::rows {

// Ordered: a chat template sees a message's fields, and prints tool-call
// arguments, in the row's order, as Python's json.loads keeps it.
using json = nlohmann::ordered_json;

// What is wrong with one row; caught per row and reported with its line.
struct RowError {
  std::string field;  // e.g. "conversations[2].value"; empty for the row as a whole
  std::string what;
};

[[noreturn]] inline void row_fail(std::string field, std::string what) {
  throw RowError{std::move(field), std::move(what)};
}

// `error` as a bad row is described after its "file:line: ": "field "f": what".
inline std::string describe(const RowError& error) {
  return (error.field.empty() ? "" : "field \"" + error.field + "\": ") + error.what;
}

inline bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  });
}

// Finds the first key given twice in one object while a row is parsed,
// from the parser's events, and names it by its path ("messages[1].content").
// JSON leaves a repeated key's meaning open and nlohmann, as Python's
// json.loads, silently keeps the last value: a row written twice into one
// object by a buggy exporter would train on half of what it holds.
class DuplicateKeyFinder {
 public:
  // Called for every parser event; `depth` and `parsed` as nlohmann gives them.
  void on_event(int depth, json::parse_event_t event, const json& parsed) {
    if (!duplicate_.empty()) return;
    const size_t level = static_cast<size_t>(depth);
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        enter_element(level);
        containers_.resize(level);  // drop what is left of closed siblings
        containers_.push_back({event == json::parse_event_t::array_start, -1, {}, {}});
        break;
      case json::parse_event_t::value:
        enter_element(level);
        break;
      case json::parse_event_t::key: {
        if (level == 0 || level > containers_.size()) break;
        Container& object = containers_[level - 1];
        object.key = parsed.get<std::string>();
        if (!object.keys.insert(object.key).second) duplicate_ = path_to(level);
        break;
      }
      default:
        break;
    }
  }

  // The repeated key's path; empty when every key was given once.
  const std::string& duplicate() const { return duplicate_; }

 private:
  struct Container {
    bool is_array = false;
    int64_t index = -1;                    // array: the element being read
    std::string key;                       // object: the key being read
    std::unordered_set<std::string> keys;  // object: the keys read so far
  };

  // A value (of any kind) starts at `level`: the next element of its array.
  void enter_element(size_t level) {
    if (level > 0 && level <= containers_.size() && containers_[level - 1].is_array) {
      ++containers_[level - 1].index;
    }
  }

  // The path of the value the containers above `level` are reading.
  std::string path_to(size_t level) const {
    std::string path;
    for (size_t i = 0; i < level; ++i) {
      const Container& c = containers_[i];
      if (c.is_array) {
        path += "[" + std::to_string(c.index) + "]";
      } else {
        path += (path.empty() ? "" : ".") + c.key;
      }
    }
    return path;
  }

  std::vector<Container> containers_;
  std::string duplicate_;
};

// Parses one row; values nested deeper than kMaxRowDepth are not built (an
// ordered object copies its values as it grows, recursively, so a row
// nested 100,000 deep would overflow the stack) and the row is refused.
// A key given twice in one object refuses the row too (DuplicateKeyFinder
// says why), naming the key in the message itself, as some callers report
// only the message. Every row, tools string and tools file is parsed here,
// so what a chat template walks (its printing and tojson recurse) is that
// shallow too.
inline constexpr int kMaxRowDepth = 64;
inline json parse_row(std::string_view text) {
  bool too_deep = false;
  DuplicateKeyFinder keys;
  const json::parser_callback_t guard = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxRowDepth) {
      too_deep = true;
      return false;
    }
    keys.on_event(depth, event, parsed);
    return true;
  };
  json value = json::parse(text, guard);
  if (too_deep) row_fail("", "nests deeper than " + std::to_string(kMaxRowDepth));
  if (!keys.duplicate().empty()) {
    row_fail("", "has the key \"" + keys.duplicate() +
                     "\" twice; a JSON reader keeps only the last value, so which one was meant "
                     "cannot be told (give each key once)");
  }
  return value;
}

// One row of a JSON layout as its object, read as training reads it (and
// eval and generate read their prompts): a RowError when it is not one,
// naming the field that holds invalid UTF-8 or a lone surrogate escape
// (\ud800), and saying so when a line ends inside its object (a
// pretty-printed .jsonl). Defined in dataset.cpp.
json parse_object(std::string_view text);

// The field `key`, or null when it is absent or null.
inline const json* member(const json& row, const std::string& key) {
  auto it = row.find(key);
  return it == row.end() || it->is_null() ? nullptr : &*it;
}

inline std::string string_field(const json& row, const std::string& key, const std::string& where) {
  const json* value = member(row, key);
  if (value == nullptr) row_fail(where, row.contains(key) ? "null (expected a string)" : "missing");
  if (!value->is_string())
    row_fail(where, std::string("expected a string, found ") + value->type_name());
  return value->get<std::string>();
}

inline std::string optional_string_field(const json& row, const std::string& key) {
  return member(row, key) ? string_field(row, key, key) : std::string();
}

// The prompt/response field pairs the query_response format knows, in order
// of preference (a prompt field may pair with more than one response field).
inline constexpr std::array<std::pair<const char*, const char*>, 4> kQueryResponsePairs = {{
    {"query", "response"},     // MetaMathQA
    {"question", "answer"},    // GSM8K
    {"prompt", "completion"},  // OpenAI fine-tuning files
    {"prompt", "response"},
}};

// The query_response fields of `row`, as train and eval both choose them: a
// field given (not empty) is kept; else the first known pair the row has
// both of (or whose given half matches), else the first known prompt field
// and the first known response field it has; one not found stays "".
inline void choose_query_response_fields(const json& row, std::string& prompt,
                                         std::string& response) {
  const auto has = [&](const char* key) { return member(row, key) != nullptr; };
  for (const auto& [p, r] : kQueryResponsePairs) {
    if ((prompt.empty() ? has(p) : prompt == p) && (response.empty() ? has(r) : response == r)) {
      prompt = p;
      response = r;
      return;
    }
  }
  for (const auto& [p, r] : kQueryResponsePairs) {
    if (prompt.empty() && has(p)) prompt = p;
  }
  for (const auto& [p, r] : kQueryResponsePairs) {
    if (response.empty() && has(r)) response = r;
  }
}

// LLaMA-Factory's alpaca "history": the turns before the row's own, a list
// of [instruction, response] pairs, oldest first. They go into `messages`
// (a single turn: the row's system turn, if any, then its user turn and,
// for training, its assistant turn) after the system turn, as user and
// assistant turns. Their responses are assistant turns like any other, so
// the templates train them as they train a sharegpt row's earlier answers
// (every assistant turn unless train_on_prompt; LLaMA-Factory's default,
// mask_history false): a row with history trains exactly as the same
// conversation written as a sharegpt row. Absent or null: no turns. As
// sharegpt_messages, training refuses an empty response (`for_prompts`
// does not).
inline void insert_history(const json& row, std::vector<ChatMessage>& messages, bool for_prompts) {
  const json* history = member(row, "history");
  if (history == nullptr) return;
  if (!history->is_array()) {
    row_fail("history", std::string("expected a list of [instruction, response] pairs, found ") +
                            history->type_name());
  }
  std::vector<ChatMessage> turns;
  for (size_t i = 0; i < history->size(); ++i) {
    const json& pair = (*history)[i];
    const std::string where = "history[" + std::to_string(i) + "]";
    if (!pair.is_array() || pair.size() != 2) {
      row_fail(where, "expected a pair [instruction, response], found " + brief_json(pair));
    }
    for (size_t j = 0; j < 2; ++j) {
      if (!pair[j].is_string()) {
        row_fail(where + "[" + std::to_string(j) + "]",
                 std::string("expected a string, found ") + pair[j].type_name());
      }
    }
    const std::string& response = pair[1].get_ref<const std::string&>();
    if (!for_prompts && is_blank(response)) row_fail(where + "[1]", "empty response");
    turns.emplace_back(Role::kUser, pair[0].get<std::string>());
    turns.emplace_back(Role::kAssistant, response);
  }
  const auto user = std::find_if(messages.begin(), messages.end(),
                                 [](const ChatMessage& m) { return m.role != Role::kSystem; });
  messages.insert(user, std::make_move_iterator(turns.begin()),
                  std::make_move_iterator(turns.end()));
}

inline std::string response_field(const json& row, const std::string& key,
                                  const std::string& where) {
  std::string text = string_field(row, key, where);
  if (is_blank(text)) row_fail(where, "empty response");
  return text;
}

// A tokens row tokenized with padding (transformers' tokenizer(...,
// padding=...) saved as it came) marks its pad tokens with 0 in
// "attention_mask". Read as ids alone, the pads were trained on as text
// (without "labels", every token is a target) where transformers' collator
// masks them, and the model learnt to write pad tokens; eval scored them.
// The positions [first, last) of a row of `length` ids that are attended:
// the padding at either end is left out (the batcher pads rows itself); a 0
// between 1s is no padding, and the row is refused. The whole row when it
// has no mask.
inline std::pair<size_t, size_t> attended_span(const json& row, size_t length) {
  const json* mask = member(row, "attention_mask");
  if (mask == nullptr) return {0, length};
  if (!mask->is_array() || mask->size() != length) {
    row_fail("attention_mask", "expected a list as long as input_ids (" + std::to_string(length) +
                                   "), found " +
                                   (mask->is_array() ? std::to_string(mask->size()) + " items"
                                                     : std::string(mask->type_name())));
  }
  size_t first = length, last = 0;
  for (size_t i = 0; i < length; ++i) {
    const json& m = (*mask)[i];
    if (!m.is_number_integer() || (m != 0 && m != 1)) {
      row_fail("attention_mask[" + std::to_string(i) + "]",
               "expected 0 or 1, found " + brief_json(m));
    }
    if (m == 0) continue;
    if (first < length && i > last) {
      row_fail("attention_mask[" + std::to_string(last) + "]",
               "0 between attended tokens (1): only padding at either end of a row is left out");
    }
    first = std::min(first, i);
    last = i + 1;
  }
  if (first == length) row_fail("attention_mask", "every token is padding (0)");
  return {first, last};
}

}  // namespace lt::data::rows
