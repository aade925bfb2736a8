#pragma once
// CLI11's own words for a command line it refuses, where they leave the
// user guessing, said in terms of what was typed.
#include <string>

namespace lt::cli {

// "--config: At Most 1 required but received 2" (a config given both as the
// first argument and with --config, which CLI11 counts as one option) as
// "--config: given 2 times, ..."; any other message as it is.
std::string parse_error_text(const std::string& what);

}  // namespace lt::cli
