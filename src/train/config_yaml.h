#pragma once
// A config file's YAML as the config reads it, beyond what yaml-cpp (0.7)
// does: YAML 1.1's merge keys, which it leaves as a key named "<<"; a hint
// when a file that does not parse indents with a tab; and a file that
// sets nothing said to be so.
#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>
#include <vector>

namespace lt::train {

// `file` parsed. Throws lt::Error naming the file when it is not valid YAML
// (and, when a line is indented with a tab, the first such line: YAML
// indents with spaces only), or when it is empty or sets no keys.
YAML::Node load_config_yaml(const std::string& file);

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
