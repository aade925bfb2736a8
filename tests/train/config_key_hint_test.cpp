// config_key_hint: what an unknown config key most likely meant, from the
// schema's own keys (a review found `train: {lr: ...}` and `stpes` refused
// with the section's key list only).
#include <gtest/gtest.h>

#include "config_errors.h"
#include "train/config.h"
#include "train/config_key_hint.h"

namespace lt::train::testing {
namespace {

const std::vector<std::string> kKeys = {
    "train.steps", "train.batch_size",        "optim.lr",          "model.path",
    "data.path",   "exec.zenflow.topk_ratio", "sched.warmup_steps"};

TEST(ConfigKeyHint, AKeyOfAnotherSectionIsNamedThere) {
  EXPECT_EQ(config_key_hint("train.lr", kKeys), "; 'lr' is a key of optim (optim.lr)");
  EXPECT_EQ(config_key_hint("steps", kKeys), "; 'steps' is a key of train (train.steps)");
  EXPECT_EQ(config_key_hint("train.path", kKeys),
            "; 'path' is a key of model (model.path) or data (data.path)");
}

TEST(ConfigKeyHint, ANearSpellingInTheSamePlaceIsSuggested) {
  EXPECT_EQ(config_key_hint("train.stpes", kKeys), "; did you mean 'train.steps'?");
  EXPECT_EQ(config_key_hint("train.batchsize", kKeys), "; did you mean 'train.batch_size'?");
  EXPECT_EQ(config_key_hint("train.Batch_Size", kKeys), "; did you mean 'train.batch_size'?");
  EXPECT_EQ(config_key_hint("exec.zenflow.topk_ratoi", kKeys),
            "; did you mean 'exec.zenflow.topk_ratio'?");
  EXPECT_EQ(config_key_hint("trian", kKeys), "; did you mean 'train'?");
  // Only within its section: optim.step is not train.steps.
  EXPECT_EQ(config_key_hint("optim.step", kKeys), "");
  // Nothing near: no guess.
  EXPECT_EQ(config_key_hint("train.frobnicate", kKeys), "");
  EXPECT_EQ(config_key_hint("train.x", kKeys), "");
}

// A key cut short, too far in spelling from the whole: the keys of its
// place that it begins, two at most; none past two, or under 3 letters.
TEST(ConfigKeyHint, AKeyCutShortIsCompleted) {
  EXPECT_EQ(config_key_hint("exec.zenflow.topk", kKeys),
            "; did you mean 'exec.zenflow.topk_ratio'?");
  EXPECT_EQ(config_key_hint("sched.warmup", kKeys), "; did you mean 'sched.warmup_steps'?");
  const std::vector<std::string> two = {"exec.zenflow.select_strategy",
                                        "exec.zenflow.select_interval"};
  EXPECT_EQ(config_key_hint("exec.zenflow.select", two),
            "; did you mean 'exec.zenflow.select_interval' or 'exec.zenflow.select_strategy'?");
  const std::vector<std::string> three = {"a.select_alpha", "a.select_beta", "a.select_gamma"};
  EXPECT_EQ(config_key_hint("a.select", three), "");
  EXPECT_EQ(config_key_hint("train.ba", kKeys), "");
  // A section cut short: the sections are listed once per key.
  EXPECT_EQ(config_key_hint("sch", kKeys), "; did you mean 'sched'?");
}

// Through the config loader, with the real schema: the hint sits in the
// message that names the file and the line.
TEST_F(ConfigErrors, AnUnknownKeySaysWhatItMostLikelyMeant) {
  std::string m = error_of(yaml("  lr: 1.0e-4\n"));
  EXPECT_MENTIONS(m, "unknown key 'train.lr'");
  EXPECT_MENTIONS(m, "; 'lr' is a key of optim (optim.lr)");
  m = error_of(yaml(), {"train.stpes=3"});
  EXPECT_MENTIONS(m, "unknown key 'train.stpes'; did you mean 'train.steps'?");
  // Keys cut short, against the loader's own keys.
  EXPECT_MENTIONS(error_of(yaml(), {"sched.warmup=5"}),
                  "unknown key 'sched.warmup'; did you mean 'sched.warmup_ratio' or "
                  "'sched.warmup_steps'?");
  EXPECT_MENTIONS(error_of(yaml(), {"exec.zenflow.topk=0.2"}),
                  "unknown key 'exec.zenflow.topk'; did you mean 'exec.zenflow.topk_ratio'?");
}

// `  steps:` with nothing after it named the line after the key and said
// "expected an integer".
TEST_F(ConfigErrors, AKeyWithNoValueIsNamedOnItsLine) {
  const std::string m = error_of(yaml("  batch_size:\n"));
  EXPECT_MENTIONS(m,
                  "config key 'train.batch_size' (line 8) has no value: give one after the "
                  "':', or leave the key out for its default");
}

// A missing data.tokenizer is named with the line that set it (the loader
// said only "no such file or folder"); a --set value's error is the
// --set's, not prefixed with the config file as if the file were wrong.
TEST_F(ConfigErrors, AMissingTokenizerAndABadSetValueAreNamedWhereTheyWereSet) {
  const std::string file = (tmp_ / "run.yaml").string();
  std::string m = error_of(yaml(), {"data.tokenizer=" + (tmp_ / "nope").string()});
  EXPECT_MENTIONS(m, "--set data.tokenizer=" + (tmp_ / "nope").string() +
                         ": config key 'data.tokenizer': no file or folder '" +
                         (tmp_ / "nope").string() + "'");
  EXPECT_EQ(m.find(file), std::string::npos) << m;
  m = error_of(yaml(), {"optim.betas=[0.9]"});
  EXPECT_EQ(m.rfind("--set optim.betas=[0.9]: config key 'optim.betas'", 0), 0u) << m;
}

}  // namespace
}  // namespace lt::train::testing
