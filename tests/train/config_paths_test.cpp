// Paths that only a shell expands (core/shell_syntax.h): a config's "~/x"
// or "$HOME/x" made a folder "~" or "$HOME" in the working folder. Refused
// in every path key, from the file (with its line) or a --set, and in the
// command line's path flags when they arrive unexpanded (quoted).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "config_errors.h"
#include "support/cli_run.h"

namespace lt::train::testing {
namespace {

// HOME as a shell here would read it, for the test's length.
class ConfigPaths : public ConfigErrors {
 protected:
  ConfigPaths() {
    if (const char* home = std::getenv("HOME")) home_ = home;
    setenv("HOME", kHome, 1);
  }
  ~ConfigPaths() override {
    if (home_) {
      setenv("HOME", home_->c_str(), 1);
    } else {
      unsetenv("HOME");
    }
  }
  static constexpr const char* kHome = "/home/lt-tester";
  std::string run_yaml() const { return (tmp_ / "run.yaml").string(); }

 private:
  std::optional<std::string> home_;
};

// The value is read, and refused, before anything else is checked: the
// rest of the config need not be there.
TEST_F(ConfigPaths, EveryPathKeyRefusesWhatOnlyAShellExpands) {
  for (const char* key : {"model.path", "data.path", "data.tokenizer", "data.eval_path",
                          "exec.disk_path", "exec.hardware", "exec.schedule", "out.dir"}) {
    const std::string k = key, section = k.substr(0, k.find('.')), name = k.substr(k.find('.') + 1);
    const std::string m = error_of(section + ":\n  " + name + ": ~/runs/x\n");
    EXPECT_MENTIONS(m, run_yaml() + ": config key '" + k +
                           "' (line 2): '~/runs/x' begins with '~', but a config is not "
                           "expanded by a shell: write /home/lt-tester/runs/x");
  }
  EXPECT_MENTIONS(error_of("data:\n  sources:\n    - path: $HOME/d.jsonl\n      weight: 1\n"),
                  "config key 'data.sources[0].path' (line 3): '$HOME/d.jsonl' refers to $HOME, "
                  "but a config is not expanded by a shell: write /home/lt-tester/d.jsonl");
  unsetenv("LT_TEST_NOT_SET");
  EXPECT_MENTIONS(error_of("out:\n  dir: ${LT_TEST_NOT_SET}/x\n"),
                  "write the path in full (${LT_TEST_NOT_SET} is not set here)");
}

TEST_F(ConfigPaths, ASetValueIsRefusedTheSameWay) {
  EXPECT_MENTIONS(error_of(yaml(), {"out.dir=~/x"}),
                  "--set out.dir=~/x: config key 'out.dir': '~/x' begins with '~', but a config "
                  "is not expanded by a shell: write /home/lt-tester/x");
  EXPECT_MENTIONS(error_of(yaml(), {"model.path=${HOME}/m"}),
                  "'${HOME}/m' refers to ${HOME}, but a config is not expanded by a shell: write "
                  "/home/lt-tester/m");
}

// What a shell leaves as it is stays a path: a ~ inside one, a $ before no
// name; and "./~" names a folder "~" on purpose.
TEST_F(ConfigPaths, PathsAShellLeavesAloneLoad) {
  write_text(tmp_ / "run.yaml", yaml());
  for (const std::string out : {"runs/~old", "./~", "runs/cost$", "runs/a$-b"}) {
    TrainConfig c;
    ASSERT_NO_THROW(c = load_train_config(run_yaml(), {"out.dir=" + out})) << out;
    EXPECT_EQ(c.out.dir, fs::absolute(out).lexically_normal().string());
  }
}

// The user's case: `out.dir: ~/x` made ./~/x beside the config. Nothing is
// made now, neither there nor in the home folder.
TEST_F(ConfigPaths, TheProgramMakesNoFolderNamedTilde) {
  const fs::path home = tmp_ / "home";
  setenv("HOME", home.c_str(), 1);
  std::string text = yaml();
  text.replace(text.find("  dir: "), text.find('\n', text.find("  dir: ")) - text.find("  dir: "),
               "  dir: ~/x");
  write_text(tmp_ / "run.yaml", text);
  const fs::path here = fs::current_path();
  fs::current_path(tmp_.path());
  std::string output;
  const int code = run_program({"train", run_yaml()}, tmp_ / "tilde.log", &output);
  fs::current_path(here);
  EXPECT_NE(code, 0) << output;
  EXPECT_MENTIONS(output, "config key 'out.dir' (line 9): '~/x' begins with '~'");
  EXPECT_MENTIONS(output, "write " + (home / "x").string());
  EXPECT_FALSE(fs::exists(tmp_ / "~"));
  EXPECT_FALSE(fs::exists(home));
}

// On the command line the shell expands an unquoted ~: one that arrives was
// quoted, and is refused with what the shell would have made of it.
TEST_F(ConfigPaths, ACommandLinePathTheShellDidNotExpandIsRefused) {
  const fs::path here = fs::current_path();
  fs::current_path(tmp_.path());
  const lt::testing::CliResult quoted =
      lt::testing::run_lazytrain("eval --model '~/m' --data data.jsonl");
  const lt::testing::CliResult dollar =
      lt::testing::run_lazytrain("convert --model m --out '$HOME/c'");
  const lt::testing::CliResult resume = lt::testing::run_lazytrain("train --resume '~/r'");
  // Unquoted, the shell expands it: the path is the home folder's.
  const lt::testing::CliResult unquoted =
      lt::testing::run_lazytrain("eval --model ~/lt_no_such_model --data data.jsonl");
  fs::current_path(here);
  EXPECT_NE(quoted.status, 0);
  EXPECT_MENTIONS(quoted.out,
                  "--model: '~/m' begins with '~', but no shell expanded it (it was quoted, or "
                  "no shell ran the command): write /home/lt-tester/m");
  EXPECT_NE(dollar.status, 0);
  EXPECT_MENTIONS(dollar.out, "--out: '$HOME/c' refers to $HOME");
  EXPECT_NE(resume.status, 0);
  EXPECT_MENTIONS(resume.out, "--resume: '~/r' begins with '~'");
  EXPECT_NE(unquoted.status, 0);
  EXPECT_EQ(unquoted.out.find("no shell expanded it"), std::string::npos) << unquoted.out;
  EXPECT_MENTIONS(unquoted.out, "/home/lt-tester/lt_no_such_model");
  EXPECT_FALSE(fs::exists(tmp_ / "~"));
  EXPECT_FALSE(fs::exists(tmp_ / "$HOME"));
}

// A relative data.path is read from the working folder: run from another
// folder, the file beside the config is missed. The error says where it is.
TEST_F(ConfigPaths, AMissedFileBesideTheConfigIsPointedAt) {
  std::string text = yaml();
  const std::string absolute = "\"" + (tmp_ / "data.jsonl").string() + "\"";
  text.replace(text.find(absolute), absolute.size(), "data.jsonl");
  write_text(tmp_ / "run.yaml", text);
  std::string m;
  {
    const InDirectory elsewhere(tmp_ / "elsewhere");
    try {
      load_train_config("../run.yaml", {});
    } catch (const Error& e) {
      m = e.what();
    }
  }
  EXPECT_MENTIONS(m, "../run.yaml (line 4): config key 'data.path': no file '" +
                         (tmp_ / "elsewhere" / "data.jsonl").string() + "'");
  EXPECT_MENTIONS(m, "not the config's: ../data.jsonl is there beside it (run from ..");
  // Written absolute (the same missing file, the same folders), the path was
  // not read from the working folder: no hint.
  std::string absolute_text = yaml();
  const std::string file = (tmp_ / "elsewhere" / "data.jsonl").string();
  absolute_text.replace(absolute_text.find(absolute), absolute.size(), "\"" + file + "\"");
  write_text(tmp_ / "run.yaml", absolute_text);
  {
    const InDirectory elsewhere(tmp_ / "elsewhere");
    try {
      load_train_config("../run.yaml", {});
    } catch (const Error& e) {
      m = e.what();
    }
  }
  EXPECT_MENTIONS(m, "config key 'data.path': no file '" + file + "'");
  EXPECT_EQ(m.find("relative paths are read"), std::string::npos) << m;
}

// `lazytrain train data.jsonl` read the rows as sections ("unknown section
// 'question'"): the dataset is named as one.
TEST_F(ConfigPaths, ADatasetGivenAsTheConfigIsNamedAsOne) {
  std::string m;
  try {
    load_train_config((tmp_ / "data.jsonl").string(), {});
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_MENTIONS(m, "config file '" + (tmp_ / "data.jsonl").string() +
                         "' is a dataset (.jsonl), not a train config (YAML): name it in a "
                         "config's data.path, or give it with --set data.path=");
}

}  // namespace
}  // namespace lt::train::testing
