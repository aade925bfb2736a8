#pragma once
// Each subcommand registers itself on the app and runs from its callback;
// errors propagate as lt::Error to main(), which prints them.
#include <CLI/CLI.hpp>

namespace lt::cli {

void add_info_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_profile_command(CLI::App& app);

}  // namespace lt::cli
