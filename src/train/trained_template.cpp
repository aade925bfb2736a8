#include "train/trained_template.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/builtin_template_jinja.h"
#include "data/chat_template.h"
#include "data/chat_template_names.h"
#include "train/config.h"
#include "train/run_setup.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

// A training source's template, and the config key that set it.
struct SourceTemplate {
  std::string name, key, path;
  std::string format;  // its own, else data.format (may be auto)
};

// Each source the run trained on (not the split-eval ones), in config order:
// its own template, else data.template, as the run filled it in.
std::vector<SourceTemplate> training_templates(const TrainConfig& c) {
  if (c.data.sources.empty())
    return {{c.data.template_name, "data.template", c.data.path, c.data.format}};
  std::vector<SourceTemplate> found;
  for (size_t i = 0; i < c.data.sources.size(); ++i) {
    const data::DataSource& s = c.data.sources[i];
    if (s.split != "train") continue;
    const std::string format = s.format.empty() ? c.data.format : s.format;
    if (s.template_name.empty()) {
      found.push_back({c.data.template_name, "data.template", s.path, format});
    } else {
      found.push_back(
          {s.template_name, fmt::format("data.sources[{}].template", i), s.path, format});
    }
  }
  return found;
}

// Note [auto's template in a checkpoint]. auto lays a chat row out in the
// tokenizer's own Jinja template when its files have one, and the
// checkpoint's copies of those files carry it as they are. With none
// (GPT-2's, a base model's tokenizer) auto lays the row out in plain,
// exactly as data.template plain does, so the checkpoint carries plain as
// Jinja as that run's does: transformers' apply_chat_template then lays a
// prompt out as the model was trained ("prompt\n"), where with no template
// it refuses the folder and a prompt written by hand easily misses the
// newline. Text and token rows take no layout, so a run of those alone
// under auto writes no template: a base model keeps having none, as on the
// Hub. (data.template plain writes its template whatever the rows: it was
// asked for by name.)
bool auto_trained_plain(const TrainConfig& c, const SourceTemplate& taken,
                        const data::TokenizerConfig& files) {
  if (!files.chat_template.empty()) return false;
  const std::string format =
      source_format(c, data::DataSource{taken.path, taken.format, 1.0, taken.name, "train"});
  return format != "text" && format != "tokens";
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
  // A name no layout has (an edited file) is the record's mistake, named
  // there: the layout's own refusal named no file.
  for (const SourceTemplate& s : sources) {
    const std::vector<std::string>& names = data::kChatTemplateNames;
    LT_CHECK(std::find(names.begin(), names.end(), s.name) != names.end(), record.string(), ": ",
             s.key, " is \"", s.name,
             "\", not a chat template (auto, chatml, qwen3, llama3 or plain); give --template to "
             "choose one");
  }
  // Mixed templates: the first training source's, and the others named.
  const SourceTemplate& taken = sources.front();
  const std::string others = other_templates(sources, taken);
  return {taken.name,
          fmt::format("{}: template {}, which the checkpoint was trained with ({} in {}){}; "
                      "--template overrides it",
                      command, taken.name, taken.key, record.string(),
                      others.empty() ? "" : "; its other training sources used " + others)};
}

PromptFields prompt_fields(const fs::path& model_dir, const PromptFields& given, bool with_response,
                           const std::string& command) {
  if (!given.prompt.empty() || !given.response.empty()) return {given.prompt, given.response, ""};
  const fs::path record = model_dir / "train_config.yaml";
  if (!fs::is_regular_file(record)) return {};
  PromptFields trained;
  try {
    const TrainConfig c = read_train_config_unchecked(record);
    trained.prompt = c.data.prompt_field;
    if (with_response) trained.response = c.data.response_field;
  } catch (const std::exception&) {
    return {};
  }
  std::vector<std::string> named, keys;
  if (!trained.prompt.empty()) {
    named.push_back("prompt field " + trained.prompt);
    keys.push_back("data.prompt_field");
  }
  if (!trained.response.empty()) {
    named.push_back("response field " + trained.response);
    keys.push_back("data.response_field");
  }
  if (named.empty()) return {};
  trained.note =
      fmt::format("{}: {}, which the checkpoint was trained with ({} in {}); {} override{} {}",
                  command, fmt::join(named, " and "), fmt::join(keys, ", "), record.string(),
                  with_response ? "--prompt-field and --response-field" : "--prompt-field",
                  with_response ? "" : "s", named.size() == 1 ? "it" : "them");
  return trained;
}

CheckpointTemplate checkpoint_template(const TrainConfig& c, const data::Tokenizer* tokenizer,
                                       const fs::path& tokenizer_path) {
  const std::vector<SourceTemplate> sources = training_templates(c);
  if (tokenizer == nullptr || sources.empty()) return {};
  const SourceTemplate& taken = sources.front();
  const data::TokenizerConfig files = data::read_tokenizer_config(tokenizer_path);
  // Note [auto's template in a checkpoint]
  std::string layout = taken.name;
  if (taken.name == "auto") layout = auto_trained_plain(c, taken, files) ? "plain" : "";
  CheckpointTemplate saved;
  if (const std::string others = other_templates(sources, taken); !others.empty()) {
    saved.note = fmt::format(
        "checkpoints carry the chat template of the first training source, {} ({} for {}); the "
        "other training sources used {}",
        layout.empty() ? "the tokenizer's own" : layout, taken.key, taken.path, others);
  }
  if (layout.empty()) return saved;
  saved.jinja = data::builtin_template_jinja(data::resolve_template_kind(layout, files).kind,
                                             *tokenizer, files);
  return saved;
}

}  // namespace lt::train
