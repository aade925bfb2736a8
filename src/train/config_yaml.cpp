#include "train/config_yaml.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace lt::train {

namespace {

// How deep merges may nest (a merged mapping's own <<, and so on), and how
// deep merged_somewhere looks: a config is a few levels deep, and an
// anchor merged into itself would otherwise never end.
constexpr int kMaxYamlDepth = 32;

// The merge key: a plain <<, whose tag yaml-cpp leaves "?" (a quoted "<<"
// has "!", a string like any other).
bool is_merge_key(const YAML::Node& key) {
  return key.IsScalar() && key.Scalar() == "<<" && key.Tag() == "?";
}

// The 1-based number of the first line whose indentation holds a tab; 0
// when none does. Blank lines do not count.
int first_tab_indented_line(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const size_t content = line.find_first_not_of(" \t\r");
    if (content == std::string::npos) continue;
    if (line.substr(0, content).find('\t') != std::string::npos) return number;
  }
  return 0;
}

// yaml-cpp names the line after a key written without its colon ("train"
// over an indented "steps: 3" reads as "illegal map value" at the steps
// line). The nearest line at or before `error_line` (1-based) that holds a
// plain key without a ':' (not a list item, comment, quoted or flow
// value), as (number, its text); (0, "") when none does.
std::pair<int, std::string> key_without_colon(const std::string& text, int error_line) {
  std::istringstream lines(text);
  std::string line;
  std::pair<int, std::string> found{0, ""};
  // A block scalar's lines ('key: |' or 'key: >', then lines indented
  // deeper than the key) are text, not keys.
  static const std::regex opens_block_scalar(R"((^|[:\-\s])[|>][-+0-9]*$)");
  size_t block_indent = std::string::npos;
  for (int number = 1; number <= error_line && std::getline(lines, line); ++number) {
    const size_t content = line.find_first_not_of(" \t\r");
    if (content == std::string::npos) continue;
    if (block_indent != std::string::npos && content > block_indent) continue;
    block_indent = std::string::npos;
    const size_t end = line.find_last_not_of(" \t\r");
    const std::string body = line.substr(content, end - content + 1);
    if (std::regex_search(body, opens_block_scalar)) block_indent = content;
    if (body.find(':') != std::string::npos ||
        std::string("-#[{\"'|>&*!%@`").find(body[0]) != std::string::npos)
      continue;
    found = {number, body};
  }
  return found;
}

// `text` as one YAML scalar in quotes: double, or single where it holds a
// '"' or '\\' (which double quotes would escape).
std::string yaml_quoted(const std::string& text) {
  if (text.find_first_of("\"\\") == std::string::npos) return "\"" + text + "\"";
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string without_trailing_spaces(const std::string& text) {
  const size_t end = text.find_last_not_of(" \t");
  return end == std::string::npos ? "" : text.substr(0, end + 1);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

// YAML reserves '@' and '`' to start a plain value, so yaml-cpp says only
// "unknown token" at `path: @assets/...`. Where `error` is at such a
// character, the value quoted as the line would hold it; "" otherwise.
std::string reserved_start_hint(const std::vector<std::string>& lines, const YAML::Mark& error) {
  if (error.line < 0 || static_cast<size_t>(error.line) >= lines.size() || error.column < 0)
    return "";
  const std::string& line = lines[error.line];
  const size_t at = static_cast<size_t>(error.column);
  if (at >= line.size() || (line[at] != '@' && line[at] != '`')) return "";
  const size_t content = line.find_first_not_of(" \t");
  const std::string before = line.substr(content, at - content);
  // In a flow collection ([@a, b]) the value ends at a ',', ']' or '}';
  // elsewhere at a comment or the line's end.
  const bool in_flow = before.find_first_of("[{") != std::string::npos;
  std::string value = line.substr(at);
  size_t end = in_flow ? value.find_first_of(",]}") : std::string::npos;
  for (const char* comment : {" #", "\t#"}) end = std::min(end, value.find(comment));
  value = without_trailing_spaces(value.substr(0, end));
  return "; a value starting with '" + std::string(1, line[at]) +
         "' must be quoted in YAML, which reserves '@' and '`' to start a plain value: " +
         (in_flow ? yaml_quoted(value) : before + yaml_quoted(value));
}

void add_merged(const YAML::Node& map, const std::string& what, LineOf line_of, int depth,
                std::vector<Entry>& entries);

// `map`'s own entries, then what its << merges.
std::vector<Entry> entries_at(const YAML::Node& map, const std::string& what, LineOf line_of,
                              int depth) {
  LT_CHECK(depth < kMaxYamlDepth, what, ": merge keys (<<) nest more than ", kMaxYamlDepth,
           " deep; is a mapping merged into itself?");
  std::vector<Entry> entries;
  std::optional<YAML::Node> merge;
  for (const auto& entry : map) {
    if (!is_merge_key(entry.first)) {
      entries.emplace_back(entry.first, entry.second);
      continue;
    }
    LT_CHECK(!merge.has_value(), what, ": the merge key '<<'", line_of(entry.first),
             " is given twice; merge a list instead (<<: [*a, *b])");
    merge = entry.second;
  }
  if (!merge) return entries;
  const YAML::Node& value = *merge;
  const std::string expected =
      " merges a mapping (<<: *name) or a list of mappings (<<: [*a, *b]), got ";
  if (value.IsMap()) {
    add_merged(value, what, line_of, depth, entries);
  } else {
    LT_CHECK(value.IsSequence(), what, ": '<<'", line_of(value), expected,
             value.IsNull() ? "nothing" : "'" + value.Scalar() + "'");
    for (const YAML::Node& item : value) {
      LT_CHECK(item.IsMap(), what, ": '<<'", line_of(item), expected, "a list holding ",
               item.IsSequence() ? "a list" : "'" + item.Scalar() + "'");
      add_merged(item, what, line_of, depth, entries);
    }
  }
  return entries;
}

// The entries of `source` (with its own merges) whose keys `entries` lacks.
void add_merged(const YAML::Node& source, const std::string& what, LineOf line_of, int depth,
                std::vector<Entry>& entries) {
  for (Entry& entry : entries_at(source, what, line_of, depth + 1)) {
    const bool given = std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
      return e.first.IsScalar() && entry.first.IsScalar() &&
             e.first.Scalar() == entry.first.Scalar();
    });
    if (!given) entries.push_back(std::move(entry));
  }
}

}  // namespace

YAML::Node load_config_yaml(const std::string& file, std::vector<std::string>* lines) {
  std::ifstream in(file, std::ios::binary);
  LT_CHECK(in, "config file '", file, "' cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    const int tab = first_tab_indented_line(text.str());
    const auto [bare, key] = key_without_colon(text.str(), e.mark.line + 1);
    // The error's own position says what is wrong, before any guess.
    std::string hint = reserved_start_hint(lines_of(text.str()), e.mark);
    if (hint.empty() && tab > 0)
      hint = "; line " + std::to_string(tab) +
             " is indented with a tab, and YAML indents with spaces only";
    else if (hint.empty() && bare > 0)
      hint = "; line " + std::to_string(bare) + " ('" + key +
             "') has no ':' (a key is written 'key: value', or 'key:' over an indented mapping)";
    fail(file, ": not valid YAML: ", e.what(), hint);
  }
  LT_CHECK(text.str().find_first_not_of(" \t\r\n") != std::string::npos, "config file '", file,
           "' is empty: it sets no keys (model.path and data.path at least)");
  LT_CHECK(!root.IsNull() && !(root.IsMap() && root.size() == 0), "config file '", file,
           "' sets no keys (model.path and data.path at least)");
  if (lines != nullptr) *lines = lines_of(text.str());
  return root;
}

bool CommentAfterValue::looks_like_a_name() const {
  return comment.size() > 1 && comment[1] != ' ' && comment[1] != '\t';
}

std::optional<CommentAfterValue> comment_after_value(const std::vector<std::string>& lines,
                                                     const YAML::Node& key,
                                                     const YAML::Node& value) {
  if (!key.IsScalar()) return std::nullopt;
  // A value left out (`path: #1.jsonl`) is null, marked on the next line:
  // the comment is then the rest of the key's line after its ':'.
  const bool none = value.IsNull() && value.Mark().line != key.Mark().line;
  if (!none && !(value.IsScalar() && value.Tag() == "?")) return std::nullopt;  // quoted
  const YAML::Node& written = none ? key : value;
  const int line_index = written.Mark().line;
  if (line_index < 0 || static_cast<size_t>(line_index) >= lines.size()) return std::nullopt;
  const std::string& line = lines[line_index];
  const size_t start = static_cast<size_t>(written.Mark().column);
  // The text as read must be the line's from its mark: a value folded
  // over lines, or a key in quotes, is not looked into.
  const std::string& text = written.Scalar();
  if (start > line.size() || line.compare(start, text.size(), text) != 0) return std::nullopt;
  size_t end = start + text.size();
  if (none) {
    end = line.find_first_not_of(" \t", end);
    if (end == std::string::npos || line[end] != ':') return std::nullopt;
    ++end;
  }
  const size_t hash = line.find_first_not_of(" \t", end);
  if (hash == std::string::npos || hash == end || line[hash] != '#') return std::nullopt;
  const size_t value_start = none ? hash : start;
  const size_t content = line.find_first_not_of(" \t");
  CommentAfterValue cut;
  cut.line = line_index + 1;
  cut.written = without_trailing_spaces(line.substr(content));
  cut.value = none ? "" : text;
  cut.comment = without_trailing_spaces(line.substr(hash));
  cut.whole = without_trailing_spaces(line.substr(value_start));
  cut.quoted = line.substr(content, value_start - content) + yaml_quoted(cut.whole);
  return cut;
}

std::string comment_cut_hint(const CommentAfterValue& cut) {
  return "; the line reads '" + cut.written +
         "', and YAML takes ' #' as the start of a comment, so the value ends before it (" +
         (cut.value.empty() ? std::string("none is left") : "'" + cut.value + "'") +
         "): if the name goes on past the '#', quote it: " + cut.quoted;
}

std::string comment_cut_warning(const CommentAfterValue& cut, const std::string& key,
                                const std::string& origin) {
  if (!cut.looks_like_a_name()) return "";
  return "warning: " + origin + ": '" + cut.written + "' reads as " + key + " '" + cut.value +
         "' followed by the comment '" + cut.comment +
         "' (YAML takes ' #' as the start of a comment); if the name is '" + cut.whole +
         "', quote it: " + cut.quoted;
}

std::vector<Entry> entries_with_merges(const YAML::Node& map, const std::string& what,
                                       LineOf line_of) {
  return entries_at(map, what, line_of, 0);
}

bool merged_somewhere(const YAML::Node& root, const YAML::Node& node) {
  std::function<bool(const YAML::Node&, int)> look = [&](const YAML::Node& n, int depth) {
    if (depth >= kMaxYamlDepth) return false;
    if (n.IsSequence()) {
      for (const YAML::Node& item : n)
        if (look(item, depth + 1)) return true;
      return false;
    }
    if (!n.IsMap()) return false;
    for (const auto& entry : n) {
      if (is_merge_key(entry.first)) {
        if (entry.second.is(node)) return true;
        if (entry.second.IsSequence())
          for (const YAML::Node& item : entry.second)
            if (item.is(node)) return true;
      }
      if (look(entry.second, depth + 1)) return true;
    }
    return false;
  };
  return look(root, 0);
}

}  // namespace lt::train
