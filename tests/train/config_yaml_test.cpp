// A config file's YAML as the config reads it (train/config_yaml.h): merge
// keys as YAML 1.1 defines them (the values below are PyYAML 6's
// safe_load of the same text), the tab hint, a file that sets nothing,
// and numbers that are not finite.
#include <gtest/gtest.h>

#include "config_errors.h"

namespace lt::train::testing {
namespace {

class ConfigYaml : public ConfigErrors {
 protected:
  TrainConfig load(const std::string& text, const std::vector<std::string>& overrides = {}) {
    write_text(tmp_ / "run.yaml", text);
    return load_train_config((tmp_ / "run.yaml").string(), overrides);
  }
  std::string run_yaml() const { return (tmp_ / "run.yaml").string(); }
};

// An anchor comes before its aliases, so the mapping to merge is written
// first: defaults (1), grad_accum (2), batch_size, seed, then yaml().
TEST_F(ConfigYaml, AMergeKeyAddsTheKeysAMappingDoesNotGive) {
  // PyYAML: train {<<: *d, batch_size: 8, seq_len: 16, steps: 2} with d
  // {grad_accum: 2, batch_size: 4, seed: 5} gives {steps: 2, batch_size:
  // 8, seq_len: 16, grad_accum: 2, seed: 5}. A top-level mapping that
  // only holds keys for the sections to merge is no unknown section.
  TrainConfig c;
  ASSERT_NO_THROW(c = load("defaults: &d\n  grad_accum: 2\n  batch_size: 4\n  seed: 5\n" +
                           yaml("  <<: *d\n  batch_size: 8\n  seq_len: 16\n")));
  EXPECT_EQ(c.train.grad_accum, 2);  // merged
  EXPECT_EQ(c.train.seed, 5u);       // merged
  EXPECT_EQ(c.train.batch_size, 8);  // its own key wins
  EXPECT_EQ(c.train.seq_len, 16);
  EXPECT_EQ(c.train.steps, 2);
  // A merged key was set where it is written.
  EXPECT_EQ(c.key_origins.at("train.grad_accum"), run_yaml() + " (line 2)");
  EXPECT_EQ(c.key_origins.at("train.batch_size"), run_yaml() + " (line 13)");
}

TEST_F(ConfigYaml, AListMergesItsEarlierMappingsFirst) {
  // PyYAML: {a: {steps: 5}, b: {steps: 6, seed: 9}, train: {<<: [*a, *b]}}
  // gives train {steps: 5, seed: 9}.
  const std::string text = "a: &a {steps: 5}\nb: &b {steps: 6, seed: 9}\n" + yaml();
  std::string with_merge = text;
  with_merge.replace(with_merge.find("  steps: 2\n"), 11, "  <<: [*a, *b]\n");
  const TrainConfig c = load(with_merge);
  EXPECT_EQ(c.train.steps, 5);
  EXPECT_EQ(c.train.seed, 9u);
}

TEST_F(ConfigYaml, MergesNestAndMayBeWrittenInline) {
  // PyYAML: base {steps: 7}; mid {<<: *base, seed: 1}; train {<<: *mid,
  // seed: 2} gives train {steps: 7, seed: 2}.
  std::string text = "base: &base {steps: 7}\nmid: &mid {<<: *base, seed: 1}\n" + yaml();
  text.replace(text.find("  steps: 2\n"), 11, "  <<: *mid\n  seed: 2\n");
  TrainConfig c = load(text);
  EXPECT_EQ(c.train.steps, 7);
  EXPECT_EQ(c.train.seed, 2u);
  // PyYAML: train {steps: 2, <<: {steps: 3, seed: 4}} gives {steps: 2, seed: 4}.
  c = load(yaml("  <<: {steps: 3, seed: 4}\n"));
  EXPECT_EQ(c.train.steps, 2);
  EXPECT_EQ(c.train.seed, 4u);
  // Into a data.sources entry, and into a subsection.
  const std::string data = (tmp_ / "data.jsonl").string();
  c = load(yaml(),
           {"data.path=", "data.sources=[{<<: {path: " + data + ", weight: 3}, weight: 2}]"});
  ASSERT_EQ(c.data.sources.size(), 1u);
  EXPECT_EQ(c.data.sources[0].path, data);
  EXPECT_EQ(c.data.sources[0].weight, 2);
  c = load(yaml("", "exec:\n  mode: zenflow\n  zenflow:\n    <<: {topk_ratio: 0.25}\n"));
  EXPECT_EQ(c.exec.zenflow.topk_ratio, 0.25);
}

// A value refused in a merged mapping names its own line, not the <<'s.
TEST_F(ConfigYaml, AMergedValueThatIsRefusedNamesItsLine) {
  const std::string merged = yaml("  <<: *d\n");
  EXPECT_MENTIONS(error_of("defaults: &d\n  batch_size: 8\n  grad_accum: 3\n" + merged),
                  run_yaml() + " (line 3): config key 'train.grad_accum'");
  EXPECT_MENTIONS(error_of("defaults: &d\n  seq_len: ten\n" + merged),
                  "config key 'train.seq_len' (line 2): expected an integer");
  // An unknown key merged in is an unknown key of the section.
  EXPECT_MENTIONS(error_of("defaults: &d\n  stepz: 3\n" + merged),
                  "unknown key 'train.stepz' (line 2)");
}

TEST_F(ConfigYaml, WhatIsNotAMergeIsSaid) {
  // A quoted "<<" is a key like any other (PyYAML: {'<<': {...}}).
  EXPECT_MENTIONS(error_of(yaml("  \"<<\": {seed: 3}\n")), "unknown key 'train.<<' (line 8)");
  std::string m = error_of(yaml("  <<: 3\n"));
  EXPECT_MENTIONS(m, run_yaml() + ": 'train': '<<' (line 8) merges a mapping");
  EXPECT_MENTIONS(m, "got '3'");
  EXPECT_MENTIONS(error_of(yaml("  <<: [{seed: 1}, 2]\n")), "a list holding '2'");
  EXPECT_MENTIONS(error_of(yaml("  <<: {seed: 1}\n  <<: {steps: 3}\n")),
                  "the merge key '<<' (line 9) is given twice");
  // A top-level mapping that no << merges is still an unknown section.
  EXPECT_MENTIONS(error_of(yaml("", "defaults: &d\n  steps: 3\n")), "unknown section 'defaults'");
}

// yaml-cpp says "illegal map value" for a tab-indented file: the file's
// first tab-indented line is named beside it.
TEST_F(ConfigYaml, ATabIndentedFileIsSaid) {
  std::string text = yaml("\tbatch_size: 8\n");
  std::string m = error_of(text);
  EXPECT_MENTIONS(m, run_yaml() + ": not valid YAML");
  EXPECT_MENTIONS(m, "line 8 is indented with a tab, and YAML indents with spaces only");
  // A tab inside a value, and a file that fails for another reason, are
  // not indentation.
  m = error_of(yaml("  device: \"a\tb\"\n", "[unclosed\n"));
  EXPECT_MENTIONS(m, "not valid YAML");
  EXPECT_EQ(m.find("tab"), std::string::npos) << m;
}

// A key written without its colon: yaml-cpp says "illegal map value" a line
// or more after it (or, under a section, reads the section as text); the
// line is named with what it holds.
TEST_F(ConfigYaml, AKeyWithoutItsColonIsNamed) {
  std::string m = error_of("model:\n  path: m\ntrain\n  steps: 3\n");
  EXPECT_MENTIONS(m, run_yaml() + ": not valid YAML");
  EXPECT_MENTIONS(m, "line 3 ('train') has no ':'");
  m = error_of("model:\n  path: m\ntrain:\n  batch_size 8\n  steps: 3\n");
  EXPECT_MENTIONS(m, "line 4 ('batch_size 8') has no ':'");
  m = error_of("model:\n  path: m\ntrain:\n  steps 3\n");
  EXPECT_MENTIONS(m,
                  "section 'train' (line 4) must be a mapping; it reads 'steps 3': is a ':' "
                  "missing after the key ('steps: 3')?");
  // A list item, a comment or a file failing for another reason are no
  // key without a colon.
  // A block scalar's text is no key, and the key below it is still found.
  m = error_of("model:\n  path: m\n  note: >-\n    some text\n  steps: [3\n");
  EXPECT_MENTIONS(m, "not valid YAML");
  EXPECT_EQ(m.find("has no ':'"), std::string::npos) << m;
  m = error_of("model:\n  note: |\n    text\n  path m\n  other: 1\n");
  EXPECT_MENTIONS(m, "line 4 ('path m') has no ':'");
  m = error_of("# a comment\nmodel: [unclosed\n");
  EXPECT_MENTIONS(m, "not valid YAML");
  EXPECT_EQ(m.find("has no ':'"), std::string::npos) << m;
}

TEST_F(ConfigYaml, AFileThatSetsNothingIsSaid) {
  std::string m = error_of("");
  EXPECT_MENTIONS(m, "config file '" + run_yaml() + "' is empty");
  EXPECT_EQ(m.find("model.path is required"), std::string::npos) << m;
  EXPECT_MENTIONS(error_of("\n  \n"), "is empty");
  EXPECT_MENTIONS(error_of("# only a comment\n"), "config file '" + run_yaml() + "' sets no keys");
  EXPECT_MENTIONS(error_of("{}\n"), "sets no keys");
  // A file that leaves a required key out is named with it.
  m = error_of("train:\n  steps: 3\n");
  EXPECT_MENTIONS(m, run_yaml() + ": config key 'model.path' is required");
}

// .inf passed optim.lr > 0 and failed after the model loaded, naming no
// file; every number is checked as it is read.
TEST_F(ConfigYaml, ANumberThatIsNotFiniteIsRefusedWhereItIsRead) {
  const std::string lr = yaml("", "optim:\n  lr: .inf\n");
  EXPECT_MENTIONS(error_of(lr), run_yaml() +
                                    ": config key 'optim.lr' (line 11): must be a finite number, "
                                    "got '.inf'");
  EXPECT_MENTIONS(error_of(yaml("  grad_clip: .nan\n")), "config key 'train.grad_clip' (line 8)");
  EXPECT_MENTIONS(error_of(yaml("", "optim:\n  betas: [0.9, -.inf]\n")),
                  "config key 'optim.betas[1]' (line 11): must be a finite number");
  EXPECT_MENTIONS(error_of(yaml("", "sched:\n  min_lr: .inf\n")),
                  "config key 'sched.min_lr' (line 11): must be a finite number");
  EXPECT_MENTIONS(error_of(yaml("", "exec:\n  host_memory_gb: .inf\n")),
                  "config key 'exec.host_memory_gb' (line 11)");
  EXPECT_MENTIONS(error_of(yaml(), {"optim.eps=.nan"}),
                  "--set optim.eps=.nan: config key 'optim.eps': must be a finite number");
  const std::string data = (tmp_ / "data.jsonl").string();
  EXPECT_MENTIONS(
      error_of(yaml(), {"data.path=", "data.sources=[{path: " + data + ", weight: .inf}]"}),
      "config key 'data.sources[0].weight': must be a finite number");
  // yaml-cpp reads a number past a double's range as no number.
  EXPECT_MENTIONS(error_of(yaml("", "optim:\n  lr: 1e400\n")),
                  "config key 'optim.lr' (line 11): must be a finite number, got '1e400', past "
                  "the largest a double holds");
  // lr 0 is refused as the finite numbers above 0 that it is not.
  EXPECT_MENTIONS(error_of(yaml(), {"optim.lr=0"}),
                  "config key 'optim.lr' must be a finite number above 0, got 0");
}

}  // namespace
}  // namespace lt::train::testing
