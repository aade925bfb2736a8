// What a config file's YAML does to a value a new user writes as a name:
// " #" starts a comment, so `path: my file #1.jsonl` reads as "my file"
// (a missing file's message says why; a file that is there is warned
// of), and '@' or '`' may not start a plain value (`path: @assets/...`
// was only "unknown token"). The messages are written out by hand as a
// user should read them; YAML's readings are PyYAML 6's safe_load of the
// same lines ({'path': 'my file'}, and "found character '@' that cannot
// start any token").
#include <gtest/gtest.h>

#include "config_errors.h"
#include "support/cli_run.h"

namespace lt::train::testing {
namespace {

class ConfigCommentCut : public ConfigErrors {
 protected:
  // The fixture's config with data.path's line written as `data_line`
  // (after "  path: ") and out.dir's as `out_line` (after "  dir: ").
  std::string with_lines(const std::string& data_line, const std::string& out_line = "") const {
    return "model:\n  path: \"" + fixture("llama").string() + "\"\ndata:\n  path: " + data_line +
           "\n  format: tokens\ntrain:\n  steps: 2\noptim:\n  lr: 3e-4  # from the paper\nout:\n"
           "  dir: " +
           (out_line.empty() ? "\"" + (tmp_ / "out").string() + "\"" : out_line) + "\n";
  }
  TrainConfig load(const std::string& text, const std::vector<std::string>& overrides = {}) {
    write_text(tmp_ / "run.yaml", text);
    return load_train_config(run_yaml(), overrides);
  }
  std::string run_yaml() const { return (tmp_ / "run.yaml").string(); }
  std::string named(const std::string& name) const { return (tmp_ / name).string(); }
};

TEST_F(ConfigCommentCut, AMissingFileCutByACommentSaysWhy) {
  const std::string m = error_of(with_lines(named("my file") + " #1.jsonl"));
  EXPECT_EQ(m, run_yaml() + " (line 4): config key 'data.path': no file '" + named("my file") +
                   "'; the line reads 'path: " + named("my file") +
                   " #1.jsonl', and YAML takes ' #' as the start of a comment, so the value ends "
                   "before it ('" +
                   named("my file") + "'): if the name goes on past the '#', quote it: path: \"" +
                   named("my file") + " #1.jsonl\"");
  // A value the comment leaves nothing of.
  EXPECT_EQ(error_of(with_lines("#1.jsonl")),
            run_yaml() +
                " (line 4): config key 'data.path' is required (a dataset file), or "
                "'data.sources' (a list of {path, weight, ...}); the line reads 'path: #1.jsonl', "
                "and YAML takes ' #' as the start of a comment, so the value ends before it (none "
                "is left): if the name goes on past the '#', quote it: path: \"#1.jsonl\"");
  // A missing file without a comment on its line says only that.
  EXPECT_EQ(error_of(with_lines(named("my file"))),
            run_yaml() + " (line 4): config key 'data.path': no file '" + named("my file") + "'");
  // So does one whose comment is an ordinary one (a space after its '#'):
  // the name did not go on into it.
  EXPECT_EQ(error_of(with_lines(named("my file") + "   # the tiny one")),
            run_yaml() + " (line 4): config key 'data.path': no file '" + named("my file") + "'");
}

TEST_F(ConfigCommentCut, AFileThatIsThereIsWarnedOfWhenTheCommentLooksLikeTheRestOfItsName) {
  fs::copy_file(tmp_ / "data.jsonl", tmp_ / "my file");
  const TrainConfig c = load(with_lines(named("my file") + " #1.jsonl"));
  EXPECT_EQ(c.data.path, named("my file"));
  EXPECT_EQ(
      c.comment_warnings(),
      std::vector<std::string>{
          "warning: " + run_yaml() + " (line 4): 'path: " + named("my file") +
          " #1.jsonl' reads as data.path '" + named("my file") +
          "' followed by the comment '#1.jsonl' (YAML takes ' #' as the start of a "
          "comment); if the name is '" +
          named("my file") + " #1.jsonl', quote it: path: \"" + named("my file") + " #1.jsonl\""});
  // The value a --set gives instead has no such line.
  EXPECT_TRUE(load(with_lines(named("my file") + " #1.jsonl"), {"data.path=" + named("data.jsonl")})
                  .comment_warnings()
                  .empty());
  // An output folder is not checked for: its warning is all there is.
  const TrainConfig out = load(with_lines(named("data.jsonl"), named("out") + " #2"));
  EXPECT_EQ(out.out.dir, named("out"));
  EXPECT_EQ(
      out.comment_warnings(),
      std::vector<std::string>{"warning: " + run_yaml() + " (line 11): 'dir: " + named("out") +
                               " #2' reads as out.dir '" + named("out") +
                               "' followed by the comment '#2' (YAML takes ' #' as the "
                               "start of a comment); if the name is '" +
                               named("out") + " #2', quote it: dir: \"" + named("out") + " #2\""});
}

TEST_F(ConfigCommentCut, OrdinaryCommentsAndQuotedValuesAreSilent) {
  for (const std::string& line :
       {named("data.jsonl") + " # train split", named("data.jsonl") + "\t# train split",
        "\"" + named("data.jsonl") + "\" #1", named("data.jsonl") + " #"}) {
    EXPECT_TRUE(load(with_lines(line)).comment_warnings().empty()) << line;
  }
  // A '#' with no space before it is part of the name (PyYAML: 'a#1').
  fs::copy_file(tmp_ / "data.jsonl", tmp_ / "my#1.jsonl");
  const TrainConfig c = load(with_lines(named("my#1.jsonl")));
  EXPECT_EQ(c.data.path, named("my#1.jsonl"));
  EXPECT_TRUE(c.comment_warnings().empty());
}

TEST_F(ConfigCommentCut, ASourcesPathIsNamedByItsEntry) {
  const std::string text =
      "model:\n  path: \"" + fixture("llama").string() +
      "\"\ndata:\n  format: tokens\n  sources:\n    - path: " + named("my file") +
      " #1.jsonl\n      weight: 2\nout:\n  dir: \"" + named("out") + "\"\n";
  EXPECT_EQ(error_of(text),
            run_yaml() + " (line 6): config key 'data.sources[0].path': no file '" +
                named("my file") + "'; the line reads '- path: " + named("my file") +
                " #1.jsonl', and YAML takes ' #' as the start of a comment, so the value ends "
                "before it ('" +
                named("my file") + "'): if the name goes on past the '#', quote it: - path: \"" +
                named("my file") + " #1.jsonl\"");
  fs::copy_file(tmp_ / "data.jsonl", tmp_ / "my file");
  const std::vector<std::string> warnings = load(text).comment_warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "warning: " + run_yaml() + " (line 6): '- path: " + named("my file") +
                             " #1.jsonl' reads as data.sources[0].path '" + named("my file") +
                             "' followed by the comment '#1.jsonl' (YAML takes ' #' as the start "
                             "of a comment); if the name is '" +
                             named("my file") + " #1.jsonl', quote it: - path: \"" +
                             named("my file") + " #1.jsonl\"");
  EXPECT_TRUE(load(text, {"data.sources=[{path: " + named("data.jsonl") + "}]"})
                  .comment_warnings()
                  .empty());
}

// `lazytrain train` says it at the start, and `lazytrain plan` too.
TEST_F(ConfigCommentCut, TrainAndPlanPrintTheWarning) {
  fs::copy_file(tmp_ / "data.jsonl", tmp_ / "my file");
  write_text(tmp_ / "run.yaml", with_lines(named("my file") + " #1.jsonl"));
  const std::string warning = "warning: " + run_yaml() + " (line 4): 'path: " + named("my file") +
                              " #1.jsonl' reads as data.path '" + named("my file") +
                              "' followed by the comment '#1.jsonl'";
  for (const std::string& command :
       {"train --no-sample '" + run_yaml() + "' --set train.device=cpu --set out.overwrite=true",
        "plan --config '" + run_yaml() + "'"}) {
    const lt::testing::CliResult r = lt::testing::run_lazytrain(command);
    EXPECT_EQ(r.status, 0) << command << ": " << r.out;
    EXPECT_MENTIONS(r.out, warning);
  }
}

// `lazytrain plan` lists the inputs not there without stopping: a path a
// comment cut short is listed with the same hint as train's error.
TEST_F(ConfigCommentCut, PlansListOfMissingInputsGivesTheHint) {
  write_text(tmp_ / "run.yaml", with_lines(named("my file") + " #1.jsonl"));
  const lt::testing::CliResult r = lt::testing::run_lazytrain("plan '" + run_yaml() + "'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_MENTIONS(r.out, "not there now: data.path (no file '" + named("my file") +
                             "'); the line reads 'path: " + named("my file") +
                             " #1.jsonl', and YAML takes ' #' as the start of a comment");
}

// yaml-cpp: "error at line 2, column 9: unknown token" (the '@'); PyYAML:
// "found character '@' that cannot start any token".
TEST_F(ConfigCommentCut, AValueStartingWithAReservedCharacterIsToBeQuoted) {
  EXPECT_EQ(error_of("model:\n  path: @assets/demo/addition/model\n"),
            run_yaml() +
                ": not valid YAML: yaml-cpp: error at line 2, column 9: unknown token; a value "
                "starting with '@' must be quoted in YAML, which reserves '@' and '`' to start a "
                "plain value: path: \"@assets/demo/addition/model\"");
  EXPECT_EQ(error_of("data:\n  sources:\n    - path: `rows`.jsonl  # mine\n"),
            run_yaml() +
                ": not valid YAML: yaml-cpp: error at line 3, column 13: unknown token; a value "
                "starting with '`' must be quoted in YAML, which reserves '@' and '`' to start a "
                "plain value: - path: \"`rows`.jsonl\"");
  EXPECT_EQ(error_of("optim:\n  no_decay: [@bias, norm]\n"),
            run_yaml() +
                ": not valid YAML: yaml-cpp: error at line 2, column 14: unknown token; a value "
                "starting with '@' must be quoted in YAML, which reserves '@' and '`' to start a "
                "plain value: \"@bias\"");
  // Quoted, it is the bundled folder.
  write_text(tmp_ / "run.yaml", yaml("", "", "@assets/demo/addition/model"));
  EXPECT_EQ(load_train_config(run_yaml(), {}).model.path,
            (assets_dir() / "demo/addition/model").string());
}

}  // namespace
}  // namespace lt::train::testing
