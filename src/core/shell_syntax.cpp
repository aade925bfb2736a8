#include "core/shell_syntax.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace lt {

namespace {

bool name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// The home folder a shell gives a bare ~ ($HOME, else the password
// database's), or that of `user` for ~user; nullptr when there is none.
const char* home_of(const std::string& user) {
  if (user.empty()) {
    if (const char* home = std::getenv("HOME")) return home;
    const passwd* me = getpwuid(getuid());
    return me ? me->pw_dir : nullptr;
  }
  const passwd* them = getpwnam(user.c_str());
  return them ? them->pw_dir : nullptr;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i)
    text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return text;
}

}  // namespace

ShellSyntax find_shell_syntax(const std::string& path) {
  ShellSyntax s;
  std::vector<std::string> found, unknown;
  size_t i = 0;
  if (!path.empty() && path[0] == '~') {
    const size_t slash = path.find('/');
    const std::string user = path.substr(1, slash == std::string::npos ? slash : slash - 1);
    found.push_back("begins with '~" + user + "'");
    if (const char* home = home_of(user)) {
      s.expanded = home;
    } else {
      s.expanded = "~" + user;
      unknown.push_back(user.empty() ? "there is no home folder"
                                     : "there is no user '" + user + "'");
    }
    i = slash == std::string::npos ? path.size() : slash;
  }
  std::vector<std::string> variables;
  while (i < path.size()) {
    const char c = path[i];
    const char next = i + 1 < path.size() ? path[i + 1] : '\0';
    if (c != '$' || !(name_start(next) || next == '{')) {
      s.expanded += c;
      ++i;
      continue;
    }
    std::string reference, name;
    if (next == '{') {
      const size_t close = path.find('}', i + 2);
      if (close == std::string::npos) {  // a shell's "bad substitution": no variable
        s.expanded += c;
        ++i;
        continue;
      }
      reference = path.substr(i, close + 1 - i);
      name = path.substr(i + 2, close - i - 2);
      i = close + 1;
    } else {
      size_t end = i + 1;
      while (end < path.size() && name_char(path[end])) ++end;
      reference = path.substr(i, end - i);
      name = reference.substr(1);
      i = end;
    }
    variables.push_back(reference);
    const bool plain_name =
        !name.empty() && name_start(name[0]) && std::all_of(name.begin(), name.end(), name_char);
    const char* value = plain_name ? std::getenv(name.c_str()) : nullptr;
    if (value) {
      s.expanded += value;
    } else {
      s.expanded += reference;
      unknown.push_back(plain_name ? reference + " is not set here"
                                   : reference + " is more than a variable's name");
    }
  }
  if (!variables.empty()) found.push_back("refers to " + joined(variables));
  s.found = joined(found);
  s.unknown = joined(unknown);
  return s;
}

std::string shell_syntax_message(const std::string& path, const std::string& not_by_a_shell) {
  const ShellSyntax s = find_shell_syntax(path);
  if (s.found.empty()) return "";
  return "'" + path + "' " + s.found + ", but " + not_by_a_shell +
         (s.unknown.empty() ? ": write " + s.expanded
                            : ": write the path in full (" + s.unknown + ")");
}

std::string shell_word(const std::string& word) {
  const auto plain = [](unsigned char c) {
    return std::isalnum(c) ||
           std::string_view("_./:=@%+,-").find(static_cast<char>(c)) != std::string_view::npos;
  };
  if (!word.empty() && std::all_of(word.begin(), word.end(), plain)) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace lt
