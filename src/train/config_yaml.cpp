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

YAML::Node load_config_yaml(const std::string& file) {
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
    std::string hint;
    if (tab > 0)
      hint = "; line " + std::to_string(tab) +
             " is indented with a tab, and YAML indents with spaces only";
    else if (bare > 0)
      hint = "; line " + std::to_string(bare) + " ('" + key +
             "') has no ':' (a key is written 'key: value', or 'key:' over an indented mapping)";
    fail(file, ": not valid YAML: ", e.what(), hint);
  }
  LT_CHECK(text.str().find_first_not_of(" \t\r\n") != std::string::npos, "config file '", file,
           "' is empty: it sets no keys (model.path and data.path at least)");
  LT_CHECK(!root.IsNull() && !(root.IsMap() && root.size() == 0), "config file '", file,
           "' sets no keys (model.path and data.path at least)");
  return root;
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
