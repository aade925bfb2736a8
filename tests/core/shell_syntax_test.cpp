// core/shell_syntax.h: what bash expands in a word (its manual's "Tilde
// Expansion" and "Shell Parameter Expansion"), worked by hand with HOME
// and a variable set here, and the password database for ~user.
#include "core/shell_syntax.h"

#include <gtest/gtest.h>
#include <pwd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace lt {
namespace {

// Sets an environment variable for one test, and puts it back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ShellSyntax, ALeadingTildeIsTheHomeFolder) {
  ScopedEnv home("HOME", "/home/tester");
  ShellSyntax s = find_shell_syntax("~/runs/x");
  EXPECT_EQ(s.found, "begins with '~'");
  EXPECT_EQ(s.expanded, "/home/tester/runs/x");
  EXPECT_EQ(s.unknown, "");
  EXPECT_EQ(find_shell_syntax("~").expanded, "/home/tester");
  // bash expands ~ only at a word's start: elsewhere it is a character.
  EXPECT_EQ(find_shell_syntax("runs/~x").found, "");
  EXPECT_EQ(find_shell_syntax("./~").found, "");
  EXPECT_EQ(find_shell_syntax("/data/runs").found, "");
}

TEST(ShellSyntax, TildeUserIsThatUsersHome) {
  const passwd* root = getpwnam("root");
  ASSERT_NE(root, nullptr);
  const ShellSyntax s = find_shell_syntax("~root/x");
  EXPECT_EQ(s.found, "begins with '~root'");
  EXPECT_EQ(s.expanded, std::string(root->pw_dir) + "/x");
  const ShellSyntax nobody = find_shell_syntax("~lt_no_such_user/x");
  EXPECT_EQ(nobody.found, "begins with '~lt_no_such_user'");
  EXPECT_EQ(nobody.unknown, "there is no user 'lt_no_such_user'");
}

TEST(ShellSyntax, VariablesByNameOrInBraces) {
  ScopedEnv home("HOME", "/home/tester");
  ScopedEnv data("LT_TEST_DATA", "/mnt/d");
  ShellSyntax s = find_shell_syntax("$HOME/x");
  EXPECT_EQ(s.found, "refers to $HOME");
  EXPECT_EQ(s.expanded, "/home/tester/x");
  s = find_shell_syntax("${LT_TEST_DATA}/a_$HOME.jsonl");
  EXPECT_EQ(s.found, "refers to ${LT_TEST_DATA} and $HOME");
  EXPECT_EQ(s.expanded, "/mnt/d/a_/home/tester.jsonl");
  // A name runs over letters, digits and _: "$HOMEx" is the variable HOMEx.
  ScopedEnv unset("HOMEx", nullptr);
  s = find_shell_syntax("/a/$HOMEx");
  EXPECT_EQ(s.found, "refers to $HOMEx");
  EXPECT_EQ(s.unknown, "$HOMEx is not set here");
  s = find_shell_syntax("~/$LT_TEST_DATA");
  EXPECT_EQ(s.found, "begins with '~' and refers to $LT_TEST_DATA");
  EXPECT_EQ(s.expanded, "/home/tester//mnt/d");
  EXPECT_EQ(find_shell_syntax("${LT_TEST_DATA:-/x}").unknown,
            "${LT_TEST_DATA:-/x} is more than a variable's name");
  // bash leaves a $ before anything but a name or a brace as it is (here
  // $1, a positional parameter, is no path a config means either, but it
  // is no variable a user sets).
  for (const char* literal : {"cost$", "a$/b", "x$-y", "$1", "${", "a${b"})
    EXPECT_EQ(find_shell_syntax(literal).found, "") << literal;
}

TEST(ShellSyntax, TheMessageSaysWhatToWrite) {
  ScopedEnv home("HOME", "/home/tester");
  EXPECT_EQ(shell_syntax_message("~/x", "a config is not expanded by a shell"),
            "'~/x' begins with '~', but a config is not expanded by a shell: write "
            "/home/tester/x");
  ScopedEnv unset("LT_TEST_UNSET", nullptr);
  EXPECT_EQ(shell_syntax_message("$LT_TEST_UNSET/x", "no shell read it"),
            "'$LT_TEST_UNSET/x' refers to $LT_TEST_UNSET, but no shell read it: write the path "
            "in full ($LT_TEST_UNSET is not set here)");
  EXPECT_EQ(shell_syntax_message("/tmp/x", "no shell read it"), "");
}

// A printed command's path reads back as one argument: each word, quoted,
// goes through /bin/sh (the outside reference) and comes back as it was.
TEST(ShellWord, EachWordReadsBackWhole) {
  EXPECT_EQ(shell_word("/runs/out-1/step_2"), "/runs/out-1/step_2");
  EXPECT_EQ(shell_word("/runs/my run"), "'/runs/my run'");
  for (const std::string word : {"/tmp/sp ace/my run \xc3\xbc/step-31", "it's", "a'b'c", "$HOME",
                                 "~/x", "semi;colon", "back\\slash", "star*", "", "new\nline"}) {
    std::FILE* sh = ::popen(("printf %s " + shell_word(word)).c_str(), "r");
    ASSERT_NE(sh, nullptr);
    std::string read;
    char buffer[256];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, sh)) > 0;) read.append(buffer, n);
    EXPECT_EQ(::pclose(sh), 0) << word;
    EXPECT_EQ(read, word) << shell_word(word);
  }
}

}  // namespace
}  // namespace lt
