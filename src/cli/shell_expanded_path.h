#pragma once
// A path flag's check (core/shell_syntax.h). On a command line the shell
// expands an unquoted ~ or $NAME before the program starts, so one that
// reaches it was quoted, or no shell ran the command (a script's exec, a
// service file): taken as written it would name a folder "~" or "$HOME"
// in the working folder, made there silently for an output. Refused, with
// the path the shell would have made of it.
#include <CLI/CLI.hpp>

namespace lt::cli {

// For add_option(...)->check(shell_expanded_path()).
CLI::Validator shell_expanded_path();

}  // namespace lt::cli
