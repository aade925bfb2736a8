#pragma once
// The chat template `generate` and `eval` prompt a checkpoint with. A model
// fine-tuned in one layout (data.template chatml, say) answers well only
// when prompted in it, and the checkpoint's tokenizer files carry the
// tokenizer's own Jinja template, which "auto" would take: prompting with
// that is a silently wrong result. The checkpoint's train_config.yaml is
// the record of what the run trained with (data.template, and each
// training source's own template), so these commands read it rather than
// a second copy of the same fact. So do the query_response field names
// (data.prompt_field, data.response_field): rows in the run's own file
// have them, and without them no prompt field is found.
#include <filesystem>
#include <string>

namespace lt::data {
class Tokenizer;
}

namespace lt::train {

struct TrainConfig;

struct PromptTemplate {
  std::string name;  // auto | chatml | qwen3 | llama3 | plain, as data.template
  // One line saying where `name` came from when it is the checkpoint's
  // (and, when the run mixed templates, which it took) or why the record
  // could not be read; empty otherwise (--template, or the default auto).
  std::string note;
};

// `given`: --template when the user gave it, which always wins; empty when
// not given. Then the template the run that saved `model_dir` trained with
// (its train_config.yaml), when that is not auto; else auto, as before
// checkpoints were read for it (a model folder that is no checkpoint).
// `command` begins the note ("generate", "eval").
PromptTemplate prompt_template(const std::filesystem::path& model_dir, const std::string& given,
                               const std::string& command);

struct PromptFields {
  std::string prompt, response;  // empty: detected from the rows
  // One line naming the fields taken from the checkpoint; empty otherwise.
  std::string note;
  // Taken from the checkpoint: defaults, used only for a file whose rows
  // have the prompt field (data::DatasetOptions::fields_where_present).
  bool trained() const { return !note.empty(); }
};

// `given`: --prompt-field and --response-field; when either is given, the
// two are taken as they are (an empty one is detected). Else the run that
// saved `model_dir` named in its train_config.yaml, as train reads the
// same file with them; only the prompt's unless `with_response` (generate
// has no response). A record that cannot be read gives none: the
// template's note already says so. `command` begins the note.
PromptFields prompt_fields(const std::filesystem::path& model_dir, const PromptFields& given,
                           bool with_response, const std::string& command);

// The record above serves this program; transformers' apply_chat_template
// reads only a folder's Jinja template. So a checkpoint of a run that
// trained in a built-in layout carries that layout as its template
// (data/builtin_template_jinja.h), in place of the tokenizer's own; so does
// one whose auto became plain, the tokenizer having no template.
struct CheckpointTemplate {
  // Empty: the tokenizer's files are kept as they are (auto in the
  // tokenizer's own template, or auto over text or token rows only: Note
  // [auto's template in a checkpoint], trained_template.cpp).
  std::string jinja;
  // One line when the training sources used several templates: the first
  // one's is written, and the others are named. Empty otherwise.
  std::string note;
};

// For a run of `c` with `tokenizer` (null: a run without one, which writes
// none), whose files are at `tokenizer_path` (tokenizer_dir_of).
CheckpointTemplate checkpoint_template(const TrainConfig& c, const data::Tokenizer* tokenizer,
                                       const std::filesystem::path& tokenizer_path);

}  // namespace lt::train
