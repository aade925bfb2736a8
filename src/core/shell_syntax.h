#pragma once
// A path written for a shell that no shell read. A config's values are
// YAML, taken as written, and a quoted command-line argument reaches the
// program as typed: "~/runs" there names a folder "~" in the working
// folder (which a later `rm -rf ~`, meant for it, turns into the loss of
// the home folder), and "$HOME/runs" one named "$HOME". Paths like these
// are refused, with the path a shell here would have made of them.
#include <string>

namespace lt {

// What a shell would have expanded in a path. Only a leading ~ or ~user
// (up to the first /) and $NAME or ${...} count: a shell leaves a ~
// elsewhere as it is, and a $ before anything but a name or a brace.
struct ShellSyntax {
  std::string found;     // "begins with '~'", "refers to $HOME", ... ; "" when none
  std::string expanded;  // the path as a shell here would expand it
  std::string unknown;   // what a shell here cannot expand ("$DATA is not set"), or ""
};
ShellSyntax find_shell_syntax(const std::string& path);

// "" when `path` has none; else "'PATH' FOUND, but NOT_BY_A_SHELL: write
// EXPANDED", where `not_by_a_shell` says why nothing expanded it ("a config
// is not expanded by a shell").
std::string shell_syntax_message(const std::string& path, const std::string& not_by_a_shell);

// `word` as a shell reads it back as one argument, for commands the
// program prints to be pasted: as it is when it holds only characters no
// shell treats specially, else in single quotes (a ' inside as '\'').
// "/runs/my run" -> "'/runs/my run'".
std::string shell_word(const std::string& word);

}  // namespace lt
