#pragma once
// Each subcommand registers itself on the app and runs from its callback;
// errors propagate as lt::Error to main(), which prints them.
#include <CLI/CLI.hpp>
#include <string>

#include "models/config.h"

namespace lt::cli {

// The model config at `path`: a Hugging Face folder or a config.json
// (plan and profile take either, so large models plan without weights).
models::ModelConfig load_model_config(const std::string& path);

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
