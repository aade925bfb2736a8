// A key two --set options give is said, naming the key and both values:
// `--set optim.lr=1e-4 --set optim.lr=3e-4` ran at 3e-4 without a word.
// The last still wins (helm's and git -c's convention: a wrapper's defaults
// and then the user's own). train and plan --config print the same
// warnings (overrides_given_twice).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config_errors.h"
#include "support/cli_run.h"

namespace lt::train::testing {
namespace {

using lt::testing::CliResult;
using lt::testing::run_lazytrain;

std::string warning(const std::string& key, const std::string& first, const std::string& then) {
  return "warning: --set: '" + key + "' is given twice (--set " + first + ", then --set " + then +
         "); the last is used";
}

TEST(SetOverrides, AKeyTwoOverridesSetIsSaidNamingBothValues) {
  using Warnings = std::vector<std::string>;
  EXPECT_EQ(overrides_given_twice({"optim.lr=1e-4", "optim.lr=3e-4"}),
            Warnings{warning("optim.lr", "optim.lr=1e-4", "optim.lr=3e-4")});
  // The same value twice, too, and a third time against the second.
  EXPECT_EQ(
      overrides_given_twice({"train.steps=5", "train.seed=1", "train.steps=5", "train.steps=6"}),
      (Warnings{warning("train.steps", "train.steps=5", "train.steps=5"),
                warning("train.steps", "train.steps=5", "train.steps=6")}));
  // A key inside a mapping (exec.zenflow={...}) and the key by its name.
  EXPECT_EQ(
      overrides_given_twice({"exec.zenflow={topk_ratio: 0.1}", "exec.zenflow.topk_ratio=0.2"}),
      Warnings{warning("exec.zenflow.topk_ratio", "exec.zenflow={topk_ratio: 0.1}",
                       "exec.zenflow.topk_ratio=0.2")});
  EXPECT_EQ(overrides_given_twice({"exec.zenflow.update_interval=2",
                                   "exec.zenflow={topk_ratio: 0.1, update_interval: 3}"}),
            Warnings{warning("exec.zenflow.update_interval", "exec.zenflow.update_interval=2",
                             "exec.zenflow={topk_ratio: 0.1, update_interval: 3}")});
  // Different keys, and keys of a mapping the other leaves alone, combine.
  EXPECT_EQ(
      overrides_given_twice({"train.steps=7", "optim.lr=3e-4", "exec.zenflow={topk_ratio: 0.25}",
                             "exec.zenflow.update_interval=2"}),
      Warnings{});
}

// Overrides of different keys set every key they name; of one key, the last.
TEST_F(ConfigErrors, OverridesCombineAndTheLastOfAKeyWins) {
  write_text(tmp_ / "ok.yaml", yaml());
  const TrainConfig c =
      load_train_config((tmp_ / "ok.yaml").string(),
                        {"train.steps=7", "optim.lr=3e-4", "exec.zenflow={topk_ratio: 0.25}",
                         "exec.zenflow.update_interval=2", "optim.lr=5e-4"});
  EXPECT_EQ(c.train.steps, 7);  // the file says 2: an override, not a repeat
  EXPECT_EQ(c.optim.lr, 5e-4);  // the last of the two
  EXPECT_EQ(c.exec.zenflow.topk_ratio, 0.25);
  EXPECT_EQ(c.exec.zenflow.update_interval, 2);
}

TEST(SetOverrides, TrainAndPlanSayAKeyGivenTwice) {
  const std::string said = warning("optim.lr", "optim.lr=1e-4", "optim.lr=3e-4") + "\n";
  const std::string config = std::string(LT_SOURCE_DIR) + "/assets/demo/gsm8k.yaml";
  // train.steps=0, which the checks after the overrides refuse, so that
  // the command trains nothing after its warning.
  const std::string sets = " --set train.steps=0 --set optim.lr=1e-4 --set optim.lr=3e-4";
  for (const std::string& command : std::vector<std::string>{
           "train" + sets, "train " + config + sets, "plan --config " + config + sets}) {
    const CliResult r = run_lazytrain(command);
    EXPECT_TRUE(r.out.starts_with(said)) << command << ": " << r.out;
  }
}

}  // namespace
}  // namespace lt::train::testing
