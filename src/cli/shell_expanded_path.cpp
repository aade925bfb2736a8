#include "cli/shell_expanded_path.h"

#include "core/shell_syntax.h"

namespace lt::cli {

CLI::Validator shell_expanded_path() {
  return CLI::Validator(
      [](std::string& value) {
        return shell_syntax_message(
            value, "no shell expanded it (it was quoted, or no shell ran the command)");
      },
      "", "shell_expanded_path");
}

}  // namespace lt::cli
