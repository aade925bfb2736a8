#pragma once
// A config file's YAML as the config reads it, beyond what yaml-cpp (0.7)
// does: YAML 1.1's merge keys, which it leaves as a key named "<<"; a hint
// when a file that does not parse indents with a tab or starts a plain
// value with a reserved '@' or '`'; a file that sets nothing said to be
// so; and a value that a comment cut short.
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lt::train {

// `file` parsed, and with `lines`, its lines (for comment_after_value).
// Throws lt::Error naming the file when it is not valid YAML (and, when a
// line is indented with a tab, the first such line: YAML indents with
// spaces only; when the error is at a plain value starting with '@' or
// '`', which YAML reserves, the value quoted), or when it is empty or sets
// no keys.
YAML::Node load_config_yaml(const std::string& file, std::vector<std::string>* lines = nullptr);

// A plain (unquoted) value that its line goes on after with a comment:
// YAML starts a comment at a '#' after a space, so `path: my file
// #1.jsonl` reads as "my file". Nothing a quoted value, or one its line
// ends with.
struct CommentAfterValue {
  int line = 0;         // 1-based
  std::string written;  // the line, without its indentation and trailing spaces
  std::string value;    // as YAML read it ("" for none)
  std::string comment;  // from the '#' to the line's end
  std::string whole;    // the value and the comment as written, as one value
  std::string quoted;   // `written` with `whole` quoted
  // Whether the comment reads as the rest of a name: its '#' is followed
  // by a character other than a space ("#1.jsonl", not "# train split").
  bool looks_like_a_name() const;
};
// `key`'s `value` in a file of `lines` (load_config_yaml's).
std::optional<CommentAfterValue> comment_after_value(const std::vector<std::string>& lines,
                                                     const YAML::Node& key,
                                                     const YAML::Node& value);
// What a message about the key's value adds: the line as written, that
// YAML read the rest as a comment, and the value quoted (led by "; ").
std::string comment_cut_hint(const CommentAfterValue& cut);
// The warning said at the start where the comment looks_like_a_name: the
// file and line (`origin`: "FILE (line N)"), `key` and both readings; ""
// for an ordinary comment.
std::string comment_cut_warning(const CommentAfterValue& cut, const std::string& key,
                                const std::string& origin);

// The "(line N)" a message gives for a node, or "" (train/config.cpp's
// where(): a --set's one-line value names no line).
using LineOf = std::string (*)(const YAML::Node&);

// A mapping's entries with its merge key applied as YAML 1.1 defines it
// (yaml.org/type/merge.html): `<<: *m` or `<<: [*m1, *m2]` adds each key
// of the mapping(s) that the mapping does not give itself, of an earlier
// mapping in the list before a later one's; a merged mapping's own `<<`
// applies first. Only a plain << is the merge key ("<<" quoted is a key
// like any other). The mapping's own entries come first, in order, then
// the merged ones; each key and value is the node where it is written, so
// a message about it names that line. Throws lt::Error, led by `what` (the
// file and the mapping's key: "run.yaml: 'train'"), for a << given twice or
// naming anything but mappings.
using Entry = std::pair<YAML::Node, YAML::Node>;
std::vector<Entry> entries_with_merges(const YAML::Node& map, const std::string& what,
                                       LineOf line_of);

// Whether a `<<` under `root` merges `node` (an anchored mapping, such as a
// top-level `defaults: &d` that only holds keys for sections to merge).
bool merged_somewhere(const YAML::Node& root, const YAML::Node& node);

}  // namespace lt::train
