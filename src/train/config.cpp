#include "train/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/regular_file.h"
#include "core/shell_syntax.h"
#include "io/hf_folder.h"
#include "optim/adamw8bit.h"
#include "train/checkpoint.h"
#include "train/config_key_hint.h"
#include "train/config_yaml.h"
#include "train/demo_config.h"
#include "train/recipe_names.h"

namespace lt::train {

namespace {

// One setter per key: parses the YAML value into the config field, or
// throws naming the key and what was expected.
using Setter = std::function<void(const YAML::Node&, const std::string& key)>;
// And its writer: the field's value onto an emitter (to_yaml).
using Writer = std::function<void(YAML::Emitter&)>;
// A key's two directions, made together from one field so the key list is
// written once (schema below).
struct Access {
  Setter set;
  Writer write;
  bool is_path = false;  // a file or folder (comments_after_paths)
};

template <typename T>
Writer plain(const T& field) {
  return [&field](YAML::Emitter& e) { e << field; };
}
template <typename T>
Writer flow_list(const std::vector<T>& field) {
  return [&field](YAML::Emitter& e) {
    e << YAML::Flow << YAML::BeginSeq;
    for (const auto& x : field) e << x;
    e << YAML::EndSeq;
  };
}
// Unset (-1) stays unset (null), so that a resume with another lr or steps
// scales it again.
template <typename T>
Writer nullable(const T& field) {
  return [&field](YAML::Emitter& e) {
    if (field < 0) {
      e << YAML::Null;
    } else {
      e << field;
    }
  };
}

// Whether the nodes being read carry lines worth naming: a --set's value
// is one line of YAML of its own, named by the --set instead (apply).
thread_local bool nodes_have_file_lines = true;

std::string where(const YAML::Node& n) {
  if (!nodes_have_file_lines || n.Mark().line < 0) return "";
  return " (line " + std::to_string(n.Mark().line + 1) + ")";
}

// yaml-cpp reads YAML 1.1's octal: `steps: 010` trained 8 steps and
// `seq_len: 064` cut at 52, while `08` was no integer at all. YAML 1.2's
// core schema, and every user, reads digits with a leading zero as decimal.
template <typename T>
std::optional<T> decimal_with_leading_zero(const std::string& text) {
  const size_t digits = text.starts_with('-') || text.starts_with('+') ? 1 : 0;
  if (text.size() < digits + 2 || text[digits] != '0' ||
      !std::all_of(text.begin() + static_cast<std::ptrdiff_t>(digits), text.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  T value{};
  const char* first = text.data() + (text.starts_with('+') ? 1 : 0);
  const auto [end, error] = std::from_chars(first, text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

template <typename T>
T scalar_as(const YAML::Node& n, const std::string& key, const char* expected) {
  LT_CHECK(n.IsScalar(), "config key '", key, "'", where(n), ": expected ", expected);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    if (const std::optional<T> decimal = decimal_with_leading_zero<T>(n.Scalar())) return *decimal;
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    fail("config key '", key, "'", where(n), ": expected ", expected, ", got '", n.Scalar(), "'");
  }
}

Access str(std::string& field) {
  return {[&field](const YAML::Node& n, const std::string& key) {
            field = n.IsNull() ? "" : scalar_as<std::string>(n, key, "a string");
          },
          plain(field)};
}
Access integer(int64_t& field) {
  return {[&field](const YAML::Node& n, const std::string& key) {
            field = scalar_as<int64_t>(n, key, "an integer");
          },
          plain(field)};
}
Access unsigned_integer(uint64_t& field) {
  return {[&field](const YAML::Node& n, const std::string& key) {
            field = scalar_as<uint64_t>(n, key, "a non-negative integer");
          },
          plain(field)};
}
// A path: a config is not read by a shell, so "~/runs" would name a
// folder "~" here (core/shell_syntax.h).
Access path(std::string& field) {
  return {[&field](const YAML::Node& n, const std::string& key) {
            field = n.IsNull() ? "" : scalar_as<std::string>(n, key, "a string");
            const std::string shell =
                shell_syntax_message(field, "a config is not expanded by a shell");
            LT_CHECK(shell.empty(), "config key '", key, "'", where(n), ": ", shell);
          },
          plain(field), true};
}
// Every number is finite: .inf or .nan read from YAML would pass a check
// such as lr > 0 and fail far from the key, or never.
double finite_number(const YAML::Node& n, const std::string& key) {
  // yaml-cpp takes a number past a double's range (1e400) for no number.
  if (n.IsScalar()) {
    errno = 0;
    char* end = nullptr;
    const double read = std::strtod(n.Scalar().c_str(), &end);
    LT_CHECK(!(errno == ERANGE && std::isinf(read) && *end == '\0'), "config key '", key, "'",
             where(n), ": must be a finite number, got '", n.Scalar(),
             "', past the largest a double holds (about 1.8e308)");
  }
  const double value = scalar_as<double>(n, key, "a number");
  LT_CHECK(std::isfinite(value), "config key '", key, "'", where(n),
           ": must be a finite number, got '", n.Scalar(), "'");
  return value;
}
Access number(double& field) {
  return {[&field](const YAML::Node& n, const std::string& key) { field = finite_number(n, key); },
          plain(field)};
}
// A number that may be left unset (YAML null, or absent): -1 stands for
// unset, so a value must be >= 0.
template <typename T>
Access optional_non_negative(T& field, const char* expected, const char* unset_means) {
  return {[&field, expected, unset_means](const YAML::Node& n, const std::string& key) {
            if (n.IsNull()) {
              field = -1;
              return;
            }
            if constexpr (std::is_floating_point_v<T>) {
              field = finite_number(n, key);
            } else {
              field = scalar_as<T>(n, key, expected);
            }
            LT_CHECK(field >= 0, "config key '", key, "'", where(n),
                     ": must be >= 0 (or null: ", unset_means, "), got ", field);
          },
          nullable(field)};
}
// "auto" (stored as 0) or an integer >= 1.
Access auto_or_positive(int64_t& field) {
  return {[&field](const YAML::Node& n, const std::string& key) {
            if (n.IsScalar() && n.Scalar() == "auto") {
              field = 0;
              return;
            }
            field = scalar_as<int64_t>(n, key, "auto or an integer >= 1");
            LT_CHECK(field >= 1, "config key '", key, "'", where(n),
                     ": must be auto or an integer >= 1, got ", field);
          },
          [&field](YAML::Emitter& e) {
            if (field == 0) {
              e << "auto";
            } else {
              e << field;
            }
          }};
}
Access boolean(bool& field) {
  return {[&field](const YAML::Node& n, const std::string& key) {
            field = scalar_as<bool>(n, key, "true or false");
          },
          plain(field)};
}
// auto, on or off; YAML's booleans (true, false, yes, no) as on and off.
Access auto_on_off(std::string& field) {
  return {[&field](const YAML::Node& n, const std::string& key) {
            const std::string text = n.IsScalar() ? n.Scalar() : "";
            if (text == "auto" || text == "on" || text == "off") {
              field = text;
              return;
            }
            field = scalar_as<bool>(n, key, "auto, on or off (or true/false)") ? "on" : "off";
          },
          plain(field)};
}
Access numbers(std::vector<double>& field) {
  return {[&field](const YAML::Node& n, const std::string& key) {
            LT_CHECK(n.IsSequence(), "config key '", key, "'", where(n),
                     ": expected a list of numbers");
            field.clear();
            for (size_t i = 0; i < n.size(); ++i) {
              field.push_back(finite_number(n[i], key + "[" + std::to_string(i) + "]"));
            }
          },
          flow_list(field)};
}
Access strings(std::vector<std::string>& field) {
  return {[&field](const YAML::Node& n, const std::string& key) {
            LT_CHECK(n.IsSequence(), "config key '", key, "'", where(n),
                     ": expected a list of strings");
            field.clear();
            for (size_t i = 0; i < n.size(); ++i) {
              field.push_back(
                  scalar_as<std::string>(n[i], key + "[" + std::to_string(i) + "]", "a string"));
            }
          },
          flow_list(field)};
}

// data.sources: a list of {path, format, weight, template, split}
// mappings; written back as a block list (or [] when empty).
Access source_list(std::vector<data::DataSource>& field) {
  return {[&field](const YAML::Node& n, const std::string& key) {
            LT_CHECK(n.IsSequence() || n.IsNull(), "config key '", key, "'", where(n),
                     ": expected a list of {path, format, weight, template, split}");
            field.clear();
            for (size_t i = 0; n.IsSequence() && i < n.size(); ++i) {
              const std::string item = key + "[" + std::to_string(i) + "]";
              LT_CHECK(n[i].IsMap(), "config key '", item, "'", where(n[i]),
                       ": expected a mapping such as {path: rows.jsonl, weight: 1}");
              data::DataSource source;
              std::map<std::string, Access> fields;
              fields.emplace("path", path(source.path));
              fields.emplace("format", str(source.format));
              fields.emplace("weight", number(source.weight));
              fields.emplace("template", str(source.template_name));
              fields.emplace("split", str(source.split));
              std::map<std::string, std::string> seen_at;  // a field given twice: refused
              const auto entries = entries_with_merges(n[i], "config key '" + item + "'", where);
              for (const auto& entry : entries) {
                LT_CHECK(entry.first.IsScalar(), "config key '", item, "'", where(entry.first),
                         ": expected a field name");
                const std::string name = entry.first.Scalar();
                const auto [first, fresh] = seen_at.emplace(name, where(entry.first));
                LT_CHECK(fresh, "config key '", item, "': field '", name, "' is given twice",
                         first->second, where(entry.first), "; keep one");
                auto it = fields.find(name);
                LT_CHECK(it != fields.end(), "config key '", item, "'", where(entry.first),
                         ": unknown field '", name,
                         "' (known: path, format, weight, template, "
                         "split)");
                it->second.set(entry.second, item + "." + name);
              }
              field.push_back(source);
            }
          },
          [&field](YAML::Emitter& e) {
            if (field.empty()) {
              e << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
              return;
            }
            e << YAML::BeginSeq;
            for (const data::DataSource& s : field) {
              e << YAML::BeginMap << YAML::Key << "path" << YAML::Value << s.path;
              e << YAML::Key << "format" << YAML::Value << s.format;
              e << YAML::Key << "weight" << YAML::Value << s.weight;
              e << YAML::Key << "template" << YAML::Value << s.template_name;
              e << YAML::Key << "split" << YAML::Value << s.split << YAML::EndMap;
            }
            e << YAML::EndSeq;
          }};
}

// The schema: every key the config knows, in the order to_yaml writes them.
std::vector<std::pair<std::string, Access>> schema(TrainConfig& c) {
  return {
      {"model.path", path(c.model.path)},
      {"model.init", str(c.model.init)},
      {"data.path", path(c.data.path)},
      {"data.sources", source_list(c.data.sources)},
      {"data.format", str(c.data.format)},
      {"data.template", str(c.data.template_name)},
      {"data.tokenizer", path(c.data.tokenizer)},
      {"data.train_on_prompt", boolean(c.data.train_on_prompt)},
      {"data.pack", boolean(c.data.pack)},
      {"data.strict", boolean(c.data.strict)},
      {"data.prompt_field", str(c.data.prompt_field)},
      {"data.response_field", str(c.data.response_field)},
      {"data.eval_path", path(c.data.eval_path)},
      {"data.eval_split", number(c.data.eval_split)},
      {"data.eval_task", str(c.data.eval_task)},
      {"data.eval_max_new_tokens", integer(c.data.eval_max_new_tokens)},
      {"data.eval_answer_field", str(c.data.eval_answer_field)},
      {"train.steps", integer(c.train.steps)},
      {"train.batch_size", integer(c.train.batch_size)},
      {"train.grad_accum", integer(c.train.grad_accum)},
      {"train.seq_len", integer(c.train.seq_len)},
      {"train.grad_clip", number(c.train.grad_clip)},
      {"train.clip_with_previous_norm", boolean(c.train.clip_with_previous_norm)},
      {"train.seed", unsigned_integer(c.train.seed)},
      {"train.device", str(c.train.device)},
      {"train.dtype", str(c.train.dtype)},
      {"train.eval_every", integer(c.train.eval_every)},
      {"train.save_every", integer(c.train.save_every)},
      {"train.keep_last", integer(c.train.keep_last)},
      {"train.max_bad_steps", integer(c.train.max_bad_steps)},
      {"train.compile", auto_on_off(c.train.compile)},
      {"optim.name", str(c.optim.name)},
      {"optim.lr", number(c.optim.lr)},
      {"optim.betas", numbers(c.optim.betas)},
      {"optim.eps", number(c.optim.eps)},
      {"optim.weight_decay", number(c.optim.weight_decay)},
      {"optim.no_decay", strings(c.optim.no_decay)},
      {"optim.block_size", integer(c.optim.block_size)},
      {"optim.min_8bit_numel", integer(c.optim.min_8bit_numel)},
      {"sched.name", str(c.sched.name)},
      {"sched.warmup_steps",
       optional_non_negative(c.sched.warmup_steps, "an integer", "warmup_ratio x train.steps")},
      {"sched.warmup_ratio", number(c.sched.warmup_ratio)},
      {"sched.min_lr",
       optional_non_negative(c.sched.min_lr, "a number", "min_lr_ratio x optim.lr")},
      {"sched.min_lr_ratio", number(c.sched.min_lr_ratio)},
      {"exec.mode", str(c.exec.mode)},
      {"exec.schedule", path(c.exec.schedule)},
      {"exec.hardware", path(c.exec.hardware)},
      {"exec.disk_path", path(c.exec.disk_path)},
      {"exec.state_placement", str(c.exec.state_placement)},
      {"exec.weight_uploads", str(c.exec.weight_uploads)},
      {"exec.stages_on_device", str(c.exec.stages_on_device)},
      {"exec.fused_tail", str(c.exec.fused_tail)},
      {"exec.keep_every", integer(c.exec.keep_every)},
      {"exec.micro_batch", integer(c.exec.micro_batch)},
      {"exec.device_memory_gb", number(c.exec.device_memory_gb)},
      {"exec.host_memory_gb", number(c.exec.host_memory_gb)},
      {"exec.zenflow.topk_ratio", number(c.exec.zenflow.topk_ratio)},
      {"exec.zenflow.select_strategy", str(c.exec.zenflow.select_strategy)},
      {"exec.zenflow.select_interval", auto_or_positive(c.exec.zenflow.select_interval)},
      {"exec.zenflow.update_interval", auto_or_positive(c.exec.zenflow.update_interval)},
      {"exec.zenflow.overlap_step", boolean(c.exec.zenflow.overlap_step)},
      {"exec.zenflow.full_warm_up_rounds", integer(c.exec.zenflow.full_warm_up_rounds)},
      {"dist.timeout_s", number(c.dist.timeout_s)},
      {"dist.bucket_mb", number(c.dist.bucket_mb)},
      {"dist.zero", integer(c.dist.zero)},
      {"dist.share_weights", boolean(c.dist.share_weights)},
      {"out.dir", path(c.out.dir)},
      {"out.overwrite", boolean(c.out.overwrite)},
  };
}

// A mapping key as text; a list or mapping used as a key is refused.
std::string key_text(const YAML::Node& key, const std::string& source, const std::string& what) {
  LT_CHECK(key.IsScalar(), source, where(key), ": expected ", what,
           ", got a list or mapping as a key");
  return key.Scalar();
}

// Where `key`'s value was set (its line in `source`, or the --set), and
// where each item and field inside a list or mapping value was: a check on
// data.sources[1].weight then names that field's line, not the list's.
void note_origins(std::map<std::string, std::string>& origins, const std::string& key,
                  const std::pair<YAML::Node, YAML::Node>& entry, const std::string& source) {
  const bool from_set = source.rfind("--set", 0) == 0;
  const auto origin = [&](const YAML::Node& n) { return from_set ? source : source + where(n); };
  // A value set again (an override) replaces the items the earlier one had.
  for (auto it = origins.lower_bound(key); it != origins.end() && it->first.rfind(key, 0) == 0;) {
    const char after = it->first.size() > key.size() ? it->first[key.size()] : '\0';
    it = after == '[' || after == '.' ? origins.erase(it) : std::next(it);
  }
  origins[key] = origin(entry.first);
  std::function<void(const std::string&, const YAML::Node&)> note_inside =
      [&](const std::string& name, const YAML::Node& value) {
        if (value.IsSequence()) {
          for (size_t i = 0; i < value.size(); ++i) {
            const std::string item = name + "[" + std::to_string(i) + "]";
            origins[item] = origin(value[i]);
            note_inside(item, value[i]);
          }
        } else if (value.IsMap()) {
          for (const auto& field : entries_with_merges(value, "config key '" + name + "'", where)) {
            const std::string inner = name + "." + field.first.Scalar();
            origins[inner] = origin(field.first);
            note_inside(inner, field.second);
          }
        }
      };
  note_inside(key, entry.second);
}

// The path values of `key`'s entry in a config file of `lines` that a
// comment after them cut short, in config.comments_after_paths: the key's
// own when `is_path`, and each data.sources item's path. A value set again
// (an override) drops what the earlier one noted.
void note_comments_after_paths(TrainConfig& config, const std::string& key, const Entry& entry,
                               bool is_path, const std::string& source,
                               const std::vector<std::string>* lines) {
  auto& noted = config.comments_after_paths;
  for (auto it = noted.lower_bound(key); it != noted.end() && it->first.rfind(key, 0) == 0;) {
    const char after = it->first.size() > key.size() ? it->first[key.size()] : '\0';
    it = after == '\0' || after == '[' || after == '.' ? noted.erase(it) : std::next(it);
  }
  if (lines == nullptr) return;
  const auto note = [&](const std::string& name, const YAML::Node& k, const YAML::Node& value) {
    // An ordinary comment (`path: x  # the tiny one`) is no cut name: only
    // one reading as the rest of the name (`#1.jsonl`), or after nothing.
    if (const auto cut = comment_after_value(*lines, k, value);
        cut && (cut->looks_like_a_name() || cut->value.empty())) {
      noted[name] = {
          comment_cut_hint(*cut),
          comment_cut_warning(*cut, name, source + " (line " + std::to_string(cut->line) + ")")};
    }
  };
  if (is_path) note(key, entry.first, entry.second);
  if (key != "data.sources" || !entry.second.IsSequence()) return;
  for (size_t i = 0; i < entry.second.size(); ++i) {
    if (!entry.second[i].IsMap()) continue;
    for (const auto& field :
         entries_with_merges(entry.second[i], "config key '" + key + "'", where))
      if (field.first.IsScalar() && field.first.Scalar() == "path")
        note(key + "[" + std::to_string(i) + "].path", field.first, field.second);
  }
}

// Sets the keys `root` gives, each noted in config.key_origins as set by
// `source`; with `keys_set`, also lists them there (every key of a value
// that is a mapping of keys: exec.zenflow={topk_ratio: 0.1} sets
// exec.zenflow.topk_ratio). `file_lines`: the file's, when `source` is a
// file.
void apply(TrainConfig& config, const YAML::Node& root, const std::string& source,
           std::vector<std::string>* keys_set = nullptr,
           const std::vector<std::string>* file_lines = nullptr) {
  if (!root || root.IsNull()) return;
  struct LinesOf {
    bool before = nodes_have_file_lines;
    explicit LinesOf(bool file) { nodes_have_file_lines = file; }
    ~LinesOf() { nodes_have_file_lines = before; }
  } lines(source.rfind("--set ", 0) != 0);
  LT_CHECK(root.IsMap(), source, ": the config must be a mapping of sections (model, data, ...)");
  auto keys = schema(config);
  std::map<std::string, Access*> by_key;
  std::map<std::string, std::string> known_in_section;
  for (auto& [key, access] : keys) {
    by_key[key] = &access;
    auto section = key.substr(0, key.find('.'));
    known_in_section[section] +=
        (known_in_section[section].empty() ? "" : ", ") + key.substr(section.size() + 1);
  }
  // What an unknown name most likely meant, among every key (errors only).
  const auto hint = [&](const std::string& unknown) {
    std::vector<std::string> known;
    for (const auto& [key, access] : by_key) known.push_back(key);
    return config_key_hint(unknown, known);
  };
  // yaml-cpp keeps every entry of a mapping, duplicates included, and a
  // later one would silently win: a key given twice is refused instead.
  std::map<std::string, int> first_line;
  auto refuse_duplicate = [&](const std::string& key, const YAML::Node& node) {
    const int line = node.Mark().line + 1;
    const auto [it, inserted] = first_line.emplace(key, line);
    LT_CHECK(inserted, source, ": '", key, "' is given twice (lines ", it->second, " and ", line,
             "); keep one");
  };
  // The entries of `map` under `prefix` (a section, or a subsection such
  // as exec.zenflow, whose keys are a mapping inside the section's).
  std::function<void(const YAML::Node&, const std::string&, const std::string&)> apply_entries =
      [&](const YAML::Node& map, const std::string& prefix, const std::string& section) {
        for (const auto& entry : entries_with_merges(map, source + ": '" + prefix + "'", where)) {
          const std::string key =
              prefix + "." + key_text(entry.first, source, "a key name in " + prefix);
          refuse_duplicate(key, entry.first);
          auto it = by_key.find(key);
          if (it == by_key.end() && entry.second.IsMap() &&
              known_in_section[section].find(key.substr(section.size() + 1) + ".") !=
                  std::string::npos) {
            apply_entries(entry.second, key, section);
            continue;
          }
          LT_CHECK(it != by_key.end(), source, ": unknown key '", key, "'", where(entry.first),
                   hint(key), " (known in ", section, ": ", known_in_section[section], ")");
          // A mapping under a key that takes a value (train.steps.x=3).
          if (entry.second.IsMap() && entry.second.size() > 0) {
            const std::string inner = key_text(entry.second.begin()->first, source, "a key name");
            fail(source, ": unknown key '", key, ".", inner, "'", where(entry.first), " ('", key,
                 key == "data.sources" ? "' takes a list of sources, each '- path: FILE'"
                                       : "' takes a value",
                 ", not a mapping)");
          }
          try {
            it->second->set(entry.second, key);
          } catch (const Error& e) {
            // `  steps:` with nothing after it: a null value's mark is the
            // next line's, so the key's line is named, and what is wrong.
            if (entry.second.IsNull()) {
              const bool from_set = source.rfind("--set ", 0) == 0;
              fail(source, ": config key '", key, "'", where(entry.first),
                   " has no value: give one after the ", from_set ? "'='" : "':'",
                   ", or leave the key out for its default");
            }
            fail(source, ": ", e.what());  // the file (or --set) the value came from
          }
          note_origins(config.key_origins, key, entry, source);
          note_comments_after_paths(config, key, entry, it->second->is_path, source, file_lines);
          if (keys_set != nullptr) keys_set->push_back(key);
        }
      };
  for (const auto& section : entries_with_merges(root, source, where)) {
    const std::string name = key_text(section.first, source, "a section name");
    refuse_duplicate(name, section.first);
    // A mapping of keys for sections to merge (defaults: &d, then
    // train: {<<: *d}) is read where it is merged, not as a section.
    if (!known_in_section.count(name) && merged_somewhere(root, section.second)) continue;
    if (!known_in_section.count(name)) {
      std::string sections;
      for (const auto& [known, keys_in_it] : known_in_section)
        sections += (sections.empty() ? "" : ", ") + known;
      fail(source, ": unknown section '", name, "'", where(section.first), hint(name),
           " (known: ", sections, ")");
    }
    // "train:" over "  steps 3" reads as the section's text "steps 3".
    const std::string text = section.second.IsScalar() ? section.second.Scalar() : "";
    const size_t space = text.find(' ');
    const bool colon_left_out = space != std::string::npos && text.find(':') == std::string::npos;
    LT_CHECK(section.second.IsMap() || section.second.IsNull(), source, ": section '", name, "'",
             where(section.second), " must be a mapping",
             colon_left_out ? "; it reads '" + text + "': is a ':' missing after the key ('" +
                                  text.substr(0, space) + ":" + text.substr(space) + "')?"
                            : std::string());
    apply_entries(section.second, name, name);
  }
}

// Whether YAML took a comment off `text` on the way to `value`: a plain
// (unquoted, tag "?") scalar or a null shorter than the text around a '#'.
// A quoted scalar ("a #b", tag "!") keeps its '#'.
bool lost_a_comment(const std::string& text, const YAML::Node& value) {
  if (text.find('#') == std::string::npos) return false;
  if (!value.IsNull() && !(value.IsScalar() && value.Tag() == "?")) return false;
  const size_t first = text.find_first_not_of(" \t"), last = text.find_last_not_of(" \t");
  const size_t written = first == std::string::npos ? 0 : last + 1 - first;
  return (value.IsNull() ? 0 : value.Scalar().size()) < written;
}

// "a.b=value" -> {a: {b: value}} with value parsed as YAML.
YAML::Node override_node(const std::string& assignment) {
  const auto eq = assignment.find('=');
  LT_CHECK(eq != std::string::npos && eq > 0, "--set expects key=value, got '", assignment, "'");
  const std::string key = assignment.substr(0, eq);
  std::vector<std::string> parts;
  for (size_t from = 0;;) {
    const auto dot = key.find('.', from);
    parts.push_back(key.substr(from, dot == std::string::npos ? dot : dot - from));
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  const bool empty_part =
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
  LT_CHECK(parts.size() >= 2 && parts.size() <= 3 && !empty_part,
           "--set key must be section.name (e.g. train.steps, exec.zenflow.topk_ratio), got '", key,
           "'");
  const std::string text = assignment.substr(eq + 1);
  // YAML reserves '@' at a value's start, so `--set model.path=@assets/...`
  // (the form README gives for bundled files) failed as "unknown token": such
  // a value is the string as written. And " #" starts a YAML comment, which
  // cut `data/my file #1.jsonl` at the '#' without a word: refused instead.
  YAML::Node value;
  if (text.starts_with('@')) {
    value = YAML::Node(text);
  } else {
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      fail("--set ", key, ": the value is not valid YAML (", e.msg, ")");
    }
    LT_CHECK(!lost_a_comment(text, value), "--set ", key, ": YAML reads the '#' in '", text,
             "' as the start of a comment, which would cut the value there; quote it (--set '", key,
             "=\"", text, "\"')");
  }
  YAML::Node leaf;
  leaf[parts.back()] = value;
  for (size_t i = parts.size() - 1; i-- > 0;) {
    YAML::Node outer;
    outer[parts[i]] = leaf;
    leaf = outer;
  }
  return leaf;
}

// "@assets/..." against the bundled assets; any other relative path against
// the working folder, so that the config a run saves (config.yaml,
// train_config.yaml) names the same files when a resume starts elsewhere.
void resolve_input_path(std::string& path) {
  const std::string prefix = "@assets/";
  if (path.rfind(prefix, 0) == 0) {
    path = (assets_dir() / path.substr(prefix.size())).string();
  } else if (!path.empty()) {
    path = std::filesystem::absolute(path).lexically_normal().string();
  }
}

template <typename... Names>
void check_one_of(const std::string& value, const char* key, Names... names) {
  bool ok = ((value == names) || ...);
  if (!ok) {
    std::string list;
    ((list += (list.empty() ? "" : ", ") + std::string(names)), ...);
    fail("config key '", key, "' must be one of ", list, "; got '", value, "'");
  }
}

void check_format(const std::string& value, const std::string& key) {
  check_one_of(value, key.c_str(), "auto", "tokens", "alpaca", "query_response", "sharegpt",
               "text");
}
void check_template(const std::string& value, const std::string& key) {
  check_one_of(value, key.c_str(), "auto", "chatml", "qwen3", "llama3", "plain");
}

// A data file `key` names must be there when the command reads it.
// Why data.tokenizer's `path` cannot be read ("no file or folder 'P'"), or
// "" (none given, or there).
std::string why_no_tokenizer(const std::string& path) {
  std::error_code ec;
  if (path.empty() || std::filesystem::exists(path, ec)) return "";
  return "no file or folder '" + path + "'";
}

void check_data_file(const std::string& path, const std::string& key, DataFiles data_files) {
  if (data_files == DataFiles::kNotRead) return;
  if (const std::string why = why_not_a_file(path); !why.empty())
    fail("config key '", key, "': ", why);
}

// data.path, or data.sources with every entry's fields; data.eval_split.
void check_data_sources(const TrainConfig::Data& data, DataFiles data_files) {
  namespace fs = std::filesystem;
  LT_CHECK(data.path.empty() || data.sources.empty(),
           "config key 'data.sources' is set, and 'data.path' too; give one (data.path is the "
           "one-source shorthand: set it to \"\" when listing sources)");
  LT_CHECK(!data.path.empty() || !data.sources.empty(),
           "config key 'data.path' is required (a dataset file), or 'data.sources' (a list of "
           "{path, weight, ...})");
  if (!data.path.empty()) check_data_file(data.path, "data.path", data_files);
  bool any_train = data.sources.empty();
  for (size_t i = 0; i < data.sources.size(); ++i) {
    const data::DataSource& s = data.sources[i];
    const std::string key = "data.sources[" + std::to_string(i) + "]";
    LT_CHECK(!s.path.empty(), "config key '", key, ".path' is required (a dataset file)");
    check_data_file(s.path, key + ".path", data_files);
    LT_CHECK(std::isfinite(s.weight) && s.weight > 0, "config key '", key, ".weight' (", s.path,
             ") must be a positive number, got ", s.weight);
    if (!s.format.empty()) check_format(s.format, key + ".format");
    if (!s.template_name.empty()) check_template(s.template_name, key + ".template");
    check_one_of(s.split, (key + ".split").c_str(), "train", "eval");
    // An eval source is scored whole; a weight (other than the 1 a saved
    // config writes) would be ignored.
    LT_CHECK(s.split != "eval" || s.weight == 1.0, "config key '", key, ".weight' (", s.path,
             "): an eval source is scored whole, each row once, so its weight ", s.weight,
             " would do nothing; drop it");
    any_train = any_train || s.split == "train";
  }
  LT_CHECK(any_train,
           "config key 'data.sources': every source has split eval; at least one must "
           "be split train");
  LT_CHECK(data.eval_split >= 0 && data.eval_split < 1,
           "config key 'data.eval_split' must lie in [0, 1) (a fraction of the training rows), "
           "got ",
           data.eval_split);
}

}  // namespace

void TrainConfig::validate(DataFiles data_files) const {
  namespace fs = std::filesystem;
  LT_CHECK(!model.path.empty(),
           "config key 'model.path' is required (a Hugging Face model folder)");
  if (const std::string why = io::not_a_model_folder(model.path); !why.empty()) {
    // A recipe's model.path is a placeholder for the user's copy.
    const auto origin = key_origins.find("model.path");
    const bool from_recipe = origin != key_origins.end() &&
                             origin->second.find(recipes_dir().string()) != std::string::npos;
    fail("config key 'model.path': ", why,
         from_recipe ? "; a recipe names where its model might be: give yours with --set "
                       "model.path=FOLDER"
                     : "");
  }
  check_one_of(model.init, "model.init", "auto", "pretrained", "random");
  check_data_sources(data, data_files);
  if (!data.eval_path.empty()) check_data_file(data.eval_path, "data.eval_path", data_files);
  // Named here, with the line that set it: the tokenizer's loader said only
  // "no such file or folder", after the data's format was told.
  if (const std::string why = why_no_tokenizer(data.tokenizer);
      !why.empty() && data_files != DataFiles::kNotRead) {
    fail("config key 'data.tokenizer': ", why,
         " (a tokenizer.json, or a folder with tokenizer.json, GPT-2's encoder.json + vocab.bpe, "
         "or tokenizer.model)");
  }
  check_one_of(data.eval_task, "data.eval_task", "", "math");
  LT_CHECK(data.eval_task.empty() || !data.eval_path.empty(), "config key 'data.eval_task' (",
           data.eval_task, ") needs 'data.eval_path', the held-out rows it answers");
  LT_CHECK(data.eval_task.empty() || data.format != "tokens", "config key 'data.eval_task' (",
           data.eval_task,
           ") scores text answers: it needs a text data.format (with a tokenizer), not tokens");
  LT_CHECK(data.eval_max_new_tokens >= 1,
           "config key 'data.eval_max_new_tokens' must be at least 1, got ",
           data.eval_max_new_tokens);
  check_format(data.format, "data.format");
  check_template(data.template_name, "data.template");
  LT_CHECK(train.steps > 0, "config key 'train.steps' must be positive, got ", train.steps);
  LT_CHECK(train.batch_size > 0, "config key 'train.batch_size' must be positive, got ",
           train.batch_size);
  LT_CHECK(train.grad_accum > 0, "config key 'train.grad_accum' must be positive, got ",
           train.grad_accum);
  LT_CHECK(train.batch_size % train.grad_accum == 0, "config key 'train.grad_accum' (",
           train.grad_accum, ") must divide 'train.batch_size' (", train.batch_size, ")");
  LT_CHECK(train.seq_len >= 2, "config key 'train.seq_len' must be at least 2, got ",
           train.seq_len);
  LT_CHECK(train.grad_clip >= 0, "config key 'train.grad_clip' must be >= 0 (0 = off), got ",
           train.grad_clip);
  check_one_of(train.device, "train.device", "auto", "cpu", "cuda");
  check_one_of(train.dtype, "train.dtype", "auto", "f32", "bf16");
  LT_CHECK(train.eval_every >= 0, "config key 'train.eval_every' must be >= 0");
  LT_CHECK(train.save_every >= 0, "config key 'train.save_every' must be >= 0");
  LT_CHECK(train.keep_last >= 1, "config key 'train.keep_last' must be at least 1");
  LT_CHECK(train.max_bad_steps >= 1, "config key 'train.max_bad_steps' must be at least 1");
  check_one_of(optim.name, "optim.name", "adamw", "adamw8bit");
  // Finite already (finite_number); the optimizer alone would take 0.
  LT_CHECK(optim.lr > 0, "config key 'optim.lr' must be a finite number above 0, got ", optim.lr);
  LT_CHECK(optim.betas.size() == 2 && optim.betas[0] >= 0 && optim.betas[0] < 1 &&
               optim.betas[1] >= 0 && optim.betas[1] < 1,
           "config key 'optim.betas' must be two numbers in [0, 1)");
  LT_CHECK(optim.eps > 0, "config key 'optim.eps' must be positive");
  LT_CHECK(optim.weight_decay >= 0, "config key 'optim.weight_decay' must be >= 0");
  // The optimizer's own check, so the rule lives in one place.
  optim::validate(optim::AdamW8bitOptions{optim.block_size, optim.min_8bit_numel});
  check_one_of(sched.name, "sched.name", "constant", "linear", "cosine");
  LT_CHECK(sched.warmup_ratio >= 0 && sched.warmup_ratio <= 1,
           "config key 'sched.warmup_ratio' must lie in [0, 1], got ", sched.warmup_ratio);
  LT_CHECK(sched.min_lr_ratio >= 0 && sched.min_lr_ratio <= 1,
           "config key 'sched.min_lr_ratio' must lie in [0, 1], got ", sched.min_lr_ratio);
  // A floor above the rate contradicts the user's own keys only where the
  // schedule decays; the constant schedule never reads it.
  LT_CHECK(sched.name == "constant" || sched.min_lr <= optim.lr, "config key 'sched.min_lr' (",
           sched.min_lr, ") is above 'optim.lr' (", optim.lr,
           "); lower it, or leave it unset for sched.min_lr_ratio x optim.lr");
  check_one_of(exec.mode, "exec.mode", "auto", "resident", "streaming", "offload", "zenflow");
  check_one_of(exec.state_placement, "exec.state_placement", "auto", "host", "disk");
  check_one_of(exec.weight_uploads, "exec.weight_uploads", "auto", "bf16", "f32");
  check_one_of(exec.stages_on_device, "exec.stages_on_device", "auto", "none");
  check_one_of(exec.fused_tail, "exec.fused_tail", "auto", "off");
  check_one_of(exec.zenflow.select_strategy, "exec.zenflow.select_strategy", "auto", "step",
               "epoch");
  exec::validate(zenflow_options(*this));
  if (exec.mode != "zenflow" && exec.mode != "auto") {
    // A ZenFlow key on another executor would silently do nothing.
    const Exec::ZenFlow defaults;
    const Exec::ZenFlow& z = exec.zenflow;
    const char* changed = z.topk_ratio != defaults.topk_ratio             ? "topk_ratio"
                          : z.select_strategy != defaults.select_strategy ? "select_strategy"
                          : z.select_interval != defaults.select_interval ? "select_interval"
                          : z.update_interval != defaults.update_interval ? "update_interval"
                          : z.overlap_step != defaults.overlap_step       ? "overlap_step"
                          : z.full_warm_up_rounds != defaults.full_warm_up_rounds
                              ? "full_warm_up_rounds"
                              : nullptr;
    LT_CHECK(changed == nullptr, "config key 'exec.zenflow.", changed ? changed : "",
             "' is set, but exec.mode is ", exec.mode,
             "; it applies to exec.mode zenflow (or auto) only");
  }
  // A profile's own errors name its keys (plan/hardware.h); a file not
  // there is this key's.
  LT_CHECK(exec.hardware.empty() || exec.hardware == "defaults" ||
               std::filesystem::is_regular_file(exec.hardware),
           "config key 'exec.hardware': no file '", exec.hardware,
           "' (a hardware profile `lazytrain profile` writes, or 'defaults' for the FLOP model; "
           "leave it unset for this machine's cached profile)");
  LT_CHECK(!exec.schedule.empty(),
           "config key 'exec.schedule' must be all_gpu, every_k, auto or a schedule JSON path");
  if (exec.schedule != "all_gpu" && exec.schedule != "every_k" && exec.schedule != "auto")
    if (const std::string why = why_not_a_file(exec.schedule); !why.empty())
      fail("config key 'exec.schedule': ", why,
           " (all_gpu, every_k, auto, or a schedule JSON path)");
  LT_CHECK(exec.keep_every >= 1, "config key 'exec.keep_every' must be at least 1, got ",
           exec.keep_every);
  LT_CHECK(exec.micro_batch >= 0, "config key 'exec.micro_batch' must be >= 0 (0 = whole), got ",
           exec.micro_batch);
  LT_CHECK(exec.device_memory_gb >= 0,
           "config key 'exec.device_memory_gb' must be >= 0 (0 = unlimited), got ",
           exec.device_memory_gb);
  LT_CHECK(std::isfinite(dist.timeout_s) && dist.timeout_s > 0,
           "config key 'dist.timeout_s' must be a positive number of seconds, got ",
           dist.timeout_s);
  LT_CHECK(std::isfinite(dist.bucket_mb) && dist.bucket_mb > 0,
           "config key 'dist.bucket_mb' must be a positive number of MB, got ", dist.bucket_mb);
  LT_CHECK(dist.zero == 0 || dist.zero == 1, "config key 'dist.zero' must be 0 or 1, got ",
           dist.zero);
  LT_CHECK(exec.host_memory_gb >= 0,
           "config key 'exec.host_memory_gb' must be >= 0 (0 = what is free), got ",
           exec.host_memory_gb);
  LT_CHECK(!out.dir.empty(), "config key 'out.dir' must not be empty");
}

std::string TrainConfig::to_yaml() const {
  YAML::Emitter e;
  e.SetDoublePrecision(10);  // 3e-3 prints as 0.003, not 0.0030000000000000001
  e << YAML::BeginMap;
  std::string section, subsection;
  // The writers only read; schema takes a mutable config for the setters.
  for (auto& [key, access] : schema(const_cast<TrainConfig&>(*this))) {
    const std::string name = key.substr(0, key.find('.'));
    if (name != section) {
      if (!subsection.empty()) e << YAML::EndMap;
      subsection.clear();
      if (!section.empty()) e << YAML::EndMap;
      e << YAML::Key << name << YAML::Value << YAML::BeginMap;
      section = name;
    }
    // A subsection (exec.zenflow.*) is a mapping inside its section.
    std::string rest = key.substr(name.size() + 1);
    const auto dot = rest.find('.');
    const std::string sub = dot == std::string::npos ? "" : rest.substr(0, dot);
    if (sub != subsection) {
      if (!subsection.empty()) e << YAML::EndMap;
      if (!sub.empty()) e << YAML::Key << sub << YAML::Value << YAML::BeginMap;
      subsection = sub;
    }
    e << YAML::Key << (sub.empty() ? rest : rest.substr(dot + 1)) << YAML::Value;
    access.write(e);
  }
  if (!subsection.empty()) e << YAML::EndMap;
  e << YAML::EndMap << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

int64_t TrainConfig::effective_warmup_steps() const {
  const int64_t asked =
      sched.warmup_steps >= 0
          ? sched.warmup_steps
          // transformers' get_warmup_steps: math.ceil of the double product
          // (truncating gave a step short: 0.15 x 30 = 4.5, 0.29 x 100 =
          // 28.999999999999996).
          : static_cast<int64_t>(std::ceil(sched.warmup_ratio * static_cast<double>(train.steps)));
  return std::min(asked, train.steps);
}

double TrainConfig::effective_min_lr() const {
  if (sched.name == "constant") return 0.0;  // never read
  return sched.min_lr >= 0 ? sched.min_lr : sched.min_lr_ratio * optim.lr;
}

optim::ScheduleOptions TrainConfig::lr_schedule() const {
  optim::ScheduleOptions schedule;
  schedule.name = sched.name;
  schedule.warmup_steps = effective_warmup_steps();
  schedule.total_steps = train.steps;
  schedule.base_lr = optim.lr;
  schedule.min_lr = effective_min_lr();
  return schedule;
}

std::vector<std::string> TrainConfig::adjustments() const {
  std::vector<std::string> notes = assembly_notes;
  const bool held_out_sources =
      std::any_of(data.sources.begin(), data.sources.end(),
                  [](const data::DataSource& s) { return s.split == "eval"; });
  if (train.eval_every == 0 && (!data.eval_path.empty() || data.eval_split > 0 || held_out_sources))
    notes.push_back(
        "held-out rows are set (data.eval_path, data.eval_split or an eval source) but "
        "train.eval_every is 0: they are never evaluated" +
        std::string(data.eval_split > 0 ? ", and data.eval_split still keeps its share out of "
                                          "training"
                                        : "") +
        " (set train.eval_every)");
  if (train.eval_every > 0 && data.eval_path.empty() && data.eval_split == 0 && !held_out_sources)
    notes.push_back("train.eval_every is " + std::to_string(train.eval_every) +
                    " but no held-out rows are set: nothing is evaluated (name them with "
                    "data.eval_path, data.eval_split, or a data.sources entry with split: eval)");
  // The default schedule, constant, never decays: a floor given for it (a
  // config written for cosine, as the README's example is, without its
  // name) was taken without a word and never reached.
  if (sched.name == "constant" && (sched.min_lr >= 0 || sched.min_lr_ratio > 0))
    notes.push_back(std::string(sched.min_lr >= 0 ? "sched.min_lr" : "sched.min_lr_ratio") +
                    " is set, but sched.name is constant (the default), which never decays: the "
                    "rate stays at optim.lr after the warmup (set sched.name to cosine or linear "
                    "to decay to the floor)");
  if (sched.warmup_steps > train.steps)
    notes.push_back("sched.warmup_steps (" + std::to_string(sched.warmup_steps) +
                    ") is longer than train.steps (" + std::to_string(train.steps) +
                    "): warming up over all " + std::to_string(train.steps) + " steps");
  return notes;
}

// AdamW trains language models at about 1e-6 (fine-tuning a large one) to
// a few 1e-3 (a small one from scratch: the demo's 2e-3, GPT-2 small's
// 6e-4). Past these bounds a rate is almost surely a slip (1e6 for 1e-6, a
// lost minus sign): too high, the first update wrecks the weights (the demo
// at 1e6 collapses at once, finite but learning nothing); too low, nothing
// moves. Neither is refused: the bounds are a custom, not a rule.
constexpr double kUsualLearningRateHighest = 1e-2, kUsualLearningRateLowest = 1e-8;

std::string TrainConfig::learning_rate_warning() const {
  const bool too_high = optim.lr > kUsualLearningRateHighest;
  if (!too_high && optim.lr >= kUsualLearningRateLowest) return {};
  const auto origin = key_origins.find("optim.lr");
  return fmt::format(
      "warning: {}optim.lr is {:g}, far {} the learning rates language models train at (about "
      "1e-6 to 1e-4 to fine-tune one, up to a few 1e-3 from scratch); {}. The run goes on at "
      "this rate",
      origin == key_origins.end() ? "" : origin->second + ": ", optim.lr,
      too_high ? "above" : "below",
      too_high ? "at this rate the first updates most often make the loss diverge or the model "
                 "collapse (its gradient then stays zero)"
               : "at this rate the weights barely move");
}

exec::ZenFlowOptions zenflow_options(const TrainConfig& c) {
  const TrainConfig::Exec::ZenFlow& z = c.exec.zenflow;
  exec::ZenFlowOptions o;
  o.topk_ratio = z.topk_ratio;
  o.select_strategy =
      exec::parse_select_strategy(z.select_strategy, "config key 'exec.zenflow.select_strategy'");
  o.select_interval = z.select_interval;
  o.update_interval = z.update_interval;
  o.overlap_step = z.overlap_step;
  o.full_warm_up_rounds = z.full_warm_up_rounds;
  return o;
}

std::string resolve_compute_dtype(const std::string& dtype, bool on_cuda) {
  if (dtype != "auto") return dtype;
  return on_cuda ? "bf16" : "f32";
}

namespace {

void apply_file(TrainConfig& config, const std::string& named_file) {
  const std::string file = resolve_config_file(named_file);
  LT_CHECK(std::filesystem::exists(file), "config file '", file, "' does not exist");
  LT_CHECK(std::filesystem::is_regular_file(file), "config file '", file,
           "' is not a regular file");
  // `lazytrain train data.jsonl` read the first row as sections ("unknown
  // section 'question'"): a dataset's name says what it is.
  const std::string extension = std::filesystem::path(file).extension().string();
  for (const char* data_kind : {".jsonl", ".parquet", ".txt", ".csv"}) {
    LT_CHECK(extension != data_kind, "config file '", file, "' is a dataset (", data_kind,
             "), not a train config (YAML): name it in a config's data.path, or give it with "
             "--set data.path=",
             file, " (the demo's config and the recipes are examples)");
  }
  std::vector<std::string> lines;
  const YAML::Node root = load_config_yaml(file, &lines);
  apply(config, root, file, nullptr, &lines);
}

// The base, then the overrides, with "@assets/" paths resolved; unchecked.
TrainConfig assemble(const std::string& base_file, const std::vector<std::string>& overrides) {
  TrainConfig config;
  if (base_file.empty()) {
    apply(config, YAML::Load(embedded_demo_config()), "the embedded demo config");
  } else {
    apply_file(config, base_file);
  }
  for (const auto& o : overrides) apply(config, override_node(o), "--set " + o);
  if (base_file.empty()) config.assembly_notes = adapt_demo_to_overrides(config, overrides);
  const auto resolve = [&](std::string& path) {
    const bool relative =
        !path.empty() && !path.starts_with('@') && std::filesystem::path(path).is_relative();
    resolve_input_path(path);
    if (relative) config.relative_inputs.insert(path);
  };
  for (std::string* p :
       {&config.model.path, &config.data.path, &config.data.tokenizer, &config.data.eval_path}) {
    resolve(*p);
  }
  for (data::DataSource& source : config.data.sources) resolve(source.path);
  // Where the run writes, likewise: a resume started elsewhere from the
  // saved config continues in the same folder, not in a new one there.
  for (std::string* p : {&config.out.dir, &config.exec.disk_path})
    if (!p->empty()) *p = std::filesystem::absolute(*p).lexically_normal().string();
  return config;
}

// Every key's value as the YAML text to_yaml writes.
std::vector<std::pair<std::string, std::string>> flat_values(const TrainConfig& c) {
  const YAML::Node root = YAML::Load(c.to_yaml());
  std::vector<std::pair<std::string, std::string>> values;
  for (const auto& section : root) {
    for (const auto& entry : section.second) {
      YAML::Emitter e;
      e << YAML::Flow << entry.second;
      values.emplace_back(section.first.Scalar() + "." + entry.first.Scalar(), e.c_str());
    }
  }
  return values;
}

}  // namespace

namespace {

// A relative path in a config is read from the folder the run starts in
// (README, on @assets/), so `cd other; lazytrain train ../run.yaml` with
// `data.path: data/x.jsonl` misses the file beside the config. When
// `message` says "no file 'P'" for a key set in a config file (`origin`:
// "FILE (line N)") and P's path from the working folder exists beside that
// file, says so.
std::string beside_the_config_hint(const std::string& message, const std::string& origin,
                                   const std::set<std::string>& relative_inputs) {
  namespace fs = std::filesystem;
  size_t at = std::string::npos, start = 0;
  for (const std::string mark : {"no file '", "no file or folder '"}) {
    if ((at = message.find(mark)) != std::string::npos) {
      start = at + mark.size();
      break;
    }
  }
  const size_t line = origin.rfind(" (line ");
  if (at == std::string::npos || line == std::string::npos || origin.rfind("--set", 0) == 0)
    return "";
  const size_t end = message.find('\'', start);
  if (end == std::string::npos || !relative_inputs.count(message.substr(start, end - start)))
    return "";
  std::error_code ec;
  const fs::path missing = message.substr(start, end - start);
  const fs::path relative = fs::relative(missing, fs::current_path(), ec);
  if (ec || relative.empty() || relative.is_absolute()) return "";
  const fs::path config_dir = fs::path(origin.substr(0, line)).parent_path();
  const fs::path beside = (config_dir / relative).lexically_normal();
  if (!fs::exists(beside, ec) || fs::equivalent(beside, missing, ec)) return "";
  return "; relative paths are read from the folder the run starts in (" +
         fs::current_path().string() + "), not the config's: " + beside.string() +
         " is there beside it (run from " + (config_dir.empty() ? "." : config_dir.string()) +
         ", or write the path from here or absolute)";
}

}  // namespace

void TrainConfig::validate_naming_sources(DataFiles data_files) const {
  try {
    validate(data_files);
  } catch (const Error& e) {
    // The first key the message names, and where its value was set.
    const std::string message = e.what(), mark = "config key '";
    const size_t at = message.find(mark);
    if (at == std::string::npos) throw;
    const size_t start = at + mark.size(), end = message.find('\'', start);
    if (end == std::string::npos) throw;
    // A field left out (data.sources[0].path) was set nowhere: its entry
    // (data.sources[0]) was, so the nearest enclosing key that was names it.
    std::string key = message.substr(start, end - start);
    // A path that a comment cut short: its line says why.
    const auto noted = comments_after_paths.find(key);
    const std::string comment_hint = noted == comments_after_paths.end() ? "" : noted->second.hint;
    auto origin = key_origins.find(key);
    while (origin == key_origins.end()) {
      const size_t cut = key.find_last_of(".[");
      if (cut == std::string::npos || cut == 0) throw;
      key.resize(cut);
      origin = key_origins.find(key);
    }
    fail(origin->second, ": ", message,
         beside_the_config_hint(message, origin->second, relative_inputs), comment_hint);
  }
}

std::string TrainConfig::where_set(const std::string& key) const {
  const auto origin = key_origins.find(key);
  return origin == key_origins.end() ? std::string() : origin->second + ": ";
}

std::vector<std::string> TrainConfig::comment_warnings() const {
  std::vector<std::string> warnings;
  for (const auto& [key, noted] : comments_after_paths)
    if (!noted.warning.empty()) warnings.push_back(noted.warning);
  return warnings;
}

std::vector<std::string> input_files_not_there(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> files = {{"data.path", c.data.path},
                                                            {"data.eval_path", c.data.eval_path}};
  for (size_t k = 0; k < c.data.sources.size(); ++k)
    files.emplace_back("data.sources[" + std::to_string(k) + "].path", c.data.sources[k].path);
  files.emplace_back("data.tokenizer", c.data.tokenizer);
  std::vector<std::string> missing;
  for (const auto& [key, file] : files) {
    const std::string why = key == "data.tokenizer" ? why_no_tokenizer(file)
                            : file.empty()          ? ""
                                                    : why_not_a_file(file);
    if (why.empty()) continue;
    // A path a ` #` cut short: its hint, as train's error gives it.
    const auto noted = c.comments_after_paths.find(key);
    missing.push_back(key + " (" + why + ")" +
                      (noted == c.comments_after_paths.end() ? "" : noted->second.hint));
  }
  return missing;
}

TrainConfig load_train_config(const std::string& file, const std::vector<std::string>& overrides,
                              DataFiles data_files) {
  TrainConfig config = assemble(file, overrides);
  try {
    config.validate_naming_sources(data_files);
  } catch (const Error& e) {
    // A key the file leaves out was set nowhere: the file is still the
    // one to change.
    const std::string message = e.what();
    // A value a --set gave is named by it, not by the file.
    if (file.empty() || message.find(file) != std::string::npos || message.rfind("--set ", 0) == 0)
      throw;
    fail(file, ": ", message);
  }
  return config;
}

std::vector<std::string> overrides_given_twice(const std::vector<std::string>& overrides) {
  std::vector<std::string> warnings;
  std::map<std::string, std::string> set_by;  // key -> the override that set it last
  for (const std::string& o : overrides) {
    // The keys `o` sets, as it sets them over any config (a mapping's too).
    std::vector<std::string> keys;
    try {
      TrainConfig scratch;
      apply(scratch, override_node(o), "--set " + o, &keys);
    } catch (const Error&) {
      continue;  // said as the config is loaded, in its turn
    }
    for (const std::string& key : keys) {
      const auto [earlier, first] = set_by.emplace(key, o);
      if (!first) {
        warnings.push_back(fmt::format(
            "warning: --set: '{}' is given twice (--set {}, then --set {}); the last is used", key,
            earlier->second, o));
        earlier->second = o;
      }
    }
  }
  return warnings;
}

TrainConfig read_train_config_unchecked(const std::filesystem::path& file) {
  TrainConfig config;
  apply_file(config, file.string());
  return config;
}

std::vector<std::string> config_differences(const TrainConfig& before, const TrainConfig& after) {
  const auto a = flat_values(before), b = flat_values(after);
  std::vector<std::string> changes;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i].second != b[i].second)
      changes.push_back(a[i].first + ": " + a[i].second + " -> " + b[i].second);
  }
  return changes;
}

TrainConfig load_train_config_for(const std::string& file,
                                  const std::vector<std::string>& overrides,
                                  const std::string* resume) {
  if (resume == nullptr || !file.empty()) return load_train_config(file, overrides);
  // Which out.dir "latest" looks in, and a relative folder not in the
  // current directory ("step-10"): the overrides', else the demo's.
  const bool in_out_dir = *resume == "latest" || (std::filesystem::path(*resume).is_relative() &&
                                                  !std::filesystem::exists(*resume));
  const std::filesystem::path out_dir =
      in_out_dir ? std::filesystem::path(assemble("", overrides).out.dir) : "";
  const std::filesystem::path dir = resolve_checkpoint(*resume, out_dir);
  const std::filesystem::path saved = dir / "train_config.yaml";
  LT_CHECK(std::filesystem::is_regular_file(saved), "--resume ", *resume, ": ", saved.string(),
           " is missing, so the run's config is unknown; give it with --config");
  TrainConfig config = assemble(saved.string(), overrides);
  // The run goes on in the folder the checkpoint is in (its out.dir, also
  // when the folder was moved, or the saved out.dir is relative to where
  // that run started), unless --set out.dir names another.
  if (!overridden(overrides, "out.dir")) {
    std::filesystem::path checkpoint = std::filesystem::absolute(dir).lexically_normal();
    if (checkpoint.filename().empty()) checkpoint = checkpoint.parent_path();  // "step-3/"
    config.out.dir = checkpoint.parent_path().string();
  }
  // out.overwrite is this command's to give, never the saved run's: the
  // demo's config sets it (to run again from scratch), and taken from the
  // checkpoint it let a resume from an earlier step delete the later
  // checkpoints unasked. Without it such a resume is refused, saying how.
  if (!overridden(overrides, "out.overwrite")) config.out.overwrite = false;
  config.validate_naming_sources();
  return config;
}

std::filesystem::path assets_dir() {
  if (const char* env = std::getenv("LT_ASSETS_DIR")) return env;
  return std::filesystem::path(LT_SOURCE_DIR) / "assets";
}

}  // namespace lt::train
