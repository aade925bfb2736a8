#include "cli/parse_error.h"

#include <regex>

namespace lt::cli {

std::string parse_error_text(const std::string& what) {
  static const std::regex at_most_one(R"(^(\S+): At Most 1 required but received (\d+)$)");
  std::smatch m;
  if (!std::regex_match(what, m, at_most_one)) return what;
  const std::string option = m[1];
  std::string text = option + ": given " + m[2].str() + " times; give it once";
  // train's and plan's config is a positional argument and --config alike.
  if (option == "--config")
    text += " (the first argument is the config too: give it there or with --config)";
  return text;
}

}  // namespace lt::cli
