#pragma once
// Each subcommand registers itself on the app and runs from its callback;
// errors propagate as lt::Error to main(), which prints them.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "data/chat_template_names.h"
#include "models/config.h"

namespace lt::cli {

// The model config at `path`: a Hugging Face folder or a config.json
// (plan and profile take either, so large models plan without weights).
// A folder without config.json is refused as train refuses it
// (io::not_a_model_folder), after `named_by`: the setting that named the
// folder ("--model ").
models::ModelConfig load_model_config(const std::string& path, const std::string& named_by);
// The same refusal of a folder without config.json, for the commands that
// load the whole model (eval, generate): before it is read.
void check_model_folder(const std::string& path, const std::string& named_by);

// `plan`'s and `profile`'s sequence length when --seq-len is not given: a
// common fine-tuning length, or the model's context when that is shorter
// (ModelConfig::exact_context), so that the two agree and a profile's stage
// times fit the plan made with the same defaults.
inline constexpr int64_t kDefaultSeqLen = 1024;

// The values of --format and --template (data.format and data.template),
// checked as flags: the data loader's refusal did not name the flag.
inline const std::vector<std::string> kDatasetFormats = {"auto",           "tokens",   "alpaca",
                                                         "query_response", "sharegpt", "text"};
inline const std::vector<std::string>& kChatTemplates = data::kChatTemplateNames;
int64_t default_seq_len(const models::ModelConfig& config);

void add_info_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_launch_command(CLI::App& app);

}  // namespace lt::cli
