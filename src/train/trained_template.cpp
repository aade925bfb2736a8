#include "train/trained_template.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <vector>

#include "data/builtin_template_jinja.h"
#include "data/chat_template.h"
#include "train/config.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

// A training source's template, and the config key that set it.
struct SourceTemplate {
  std::string name, key, path;
};

// Each source the run trained on (not the split-eval ones), in config order:
// its own template, else data.template, as the run filled it in.
std::vector<SourceTemplate> training_templates(const TrainConfig& c) {
  if (c.data.sources.empty()) return {{c.data.template_name, "data.template", c.data.path}};
  std::vector<SourceTemplate> found;
  for (size_t i = 0; i < c.data.sources.size(); ++i) {
    const data::DataSource& s = c.data.sources[i];
    if (s.split != "train") continue;
    if (s.template_name.empty()) {
      found.push_back({c.data.template_name, "data.template", s.path});
    } else {
      found.push_back({s.template_name, fmt::format("data.sources[{}].template", i), s.path});
    }
  }
  return found;
}

// The templates of `sources` other than `taken`'s, with their files:
// "llama3 (b.jsonl), ...".
std::string other_templates(const std::vector<SourceTemplate>& sources,
                            const SourceTemplate& taken) {
  std::string others;
  for (const SourceTemplate& s : sources) {
    if (s.name != taken.name)
      others += fmt::format("{}{} ({})", others.empty() ? "" : ", ", s.name, s.path);
  }
  return others;
}

}  // namespace

PromptTemplate prompt_template(const fs::path& model_dir, const std::string& given,
                               const std::string& command) {
  if (!given.empty()) return {given, ""};
  const fs::path record = model_dir / "train_config.yaml";
  if (!fs::is_regular_file(record)) return {"auto", ""};
  std::vector<SourceTemplate> sources;
  try {
    sources = training_templates(read_train_config_unchecked(record));
  } catch (const std::exception& e) {
    return {"auto", fmt::format("{}: cannot read the chat template the checkpoint was trained with "
                                "from {} ({}); prompting with auto, the tokenizer's own: give "
                                "--template to choose",
                                command, record.string(), e.what())};
  }
  const bool all_auto = std::all_of(sources.begin(), sources.end(),
                                    [](const SourceTemplate& s) { return s.name == "auto"; });
  if (all_auto) return {"auto", ""};
  // Mixed templates: the first training source's, and the others named.
  const SourceTemplate& taken = sources.front();
  const std::string others = other_templates(sources, taken);
  return {taken.name,
          fmt::format("{}: template {}, which the checkpoint was trained with ({} in {}){}; "
                      "--template overrides it",
                      command, taken.name, taken.key, record.string(),
                      others.empty() ? "" : "; its other training sources used " + others)};
}

CheckpointTemplate checkpoint_template(const TrainConfig& c, const data::Tokenizer* tokenizer,
                                       const fs::path& tokenizer_path) {
  const std::vector<SourceTemplate> sources = training_templates(c);
  if (tokenizer == nullptr || sources.empty()) return {};
  const SourceTemplate& taken = sources.front();
  CheckpointTemplate saved;
  if (const std::string others = other_templates(sources, taken); !others.empty()) {
    saved.note = fmt::format(
        "checkpoints carry the chat template of the first training source, {} ({} for {}); the "
        "other training sources used {}",
        taken.name == "auto" ? "the tokenizer's own" : taken.name, taken.key, taken.path, others);
  }
  if (taken.name == "auto") return saved;
  const data::TokenizerConfig files = data::read_tokenizer_config(tokenizer_path);
  saved.jinja = data::builtin_template_jinja(data::resolve_template_kind(taken.name, files).kind,
                                             *tokenizer, files);
  return saved;
}

}  // namespace lt::train
