// exec.zenflow.* in a config: nested under exec as DeepSpeed nests them,
// settable with --set, written back by to_yaml, and bad values refused with
// the key named.
#include <gtest/gtest.h>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class ZenFlowConfig : public ::testing::Test {
 protected:
  ZenFlowConfig() : tmp_("zenflow_config") { write_random_tokens(tmp_ / "data.jsonl", 4, 97, 1); }
  fs::path write(const std::string& exec_section) const {
    const fs::path file = tmp_ / "run.yaml";
    write_text(file, "model:\n  path: \"" + fixture("llama").string() + "\"\ndata:\n  path: \"" +
                         (tmp_ / "data.jsonl").string() +
                         "\"\n  format: tokens\ntrain:\n  steps: 2\nexec:\n" + exec_section);
    return file;
  }
  std::string error_of(const std::string& exec_section,
                       const std::vector<std::string>& overrides = {}) const {
    try {
      load_train_config(write(exec_section).string(), overrides);
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  }
  TempDir tmp_;
};

TEST_F(ZenFlowConfig, NestedKeysAndSetOverridesLoadAndRoundTrip) {
  const TrainConfig c = load_train_config(
      write("  mode: zenflow\n  zenflow:\n    topk_ratio: 0.05\n    update_interval: 4\n"
            "    select_strategy: step\n    select_interval: 8\n")
          .string(),
      {"exec.zenflow.overlap_step=false"});
  EXPECT_EQ(c.exec.zenflow.topk_ratio, 0.05);
  EXPECT_EQ(c.exec.zenflow.update_interval, 4);
  EXPECT_EQ(c.exec.zenflow.select_interval, 8);
  EXPECT_EQ(c.exec.zenflow.select_strategy, "step");
  EXPECT_FALSE(c.exec.zenflow.overlap_step);
  // to_yaml nests them again, and reading that back gives the same config.
  const std::string text = c.to_yaml();
  EXPECT_MENTIONS(text, "zenflow:\n    topk_ratio: 0.05");
  write_text(tmp_ / "again.yaml", text);
  const TrainConfig again = load_train_config((tmp_ / "again.yaml").string(), {});
  EXPECT_TRUE(again.exec.zenflow == c.exec.zenflow);
  EXPECT_EQ(again.exec.mode, "zenflow");
  // auto intervals are written as auto.
  EXPECT_MENTIONS(TrainConfig{}.to_yaml(), "select_interval: auto");
}

TEST_F(ZenFlowConfig, BadValuesNameTheKey) {
  EXPECT_MENTIONS(error_of("  mode: zenflow\n  zenflow:\n    topk_ratio: 0\n"),
                  "config key 'exec.zenflow.topk_ratio': must be in (0, 1], got 0");
  // With its line, and an override named as the override (it blamed the file).
  EXPECT_MENTIONS(error_of("  mode: zenflow\n  zenflow:\n    topk_ratio: 0\n"),
                  "run.yaml (line 11): config key");
  EXPECT_MENTIONS(error_of("  mode: zenflow\n", {"exec.zenflow.topk_ratio=0"}),
                  "--set exec.zenflow.topk_ratio=0: config key 'exec.zenflow.topk_ratio'");
  EXPECT_MENTIONS(error_of("  mode: zenflow\n  zenflow:\n    topk_ratio: 1.5\n"),
                  "config key 'exec.zenflow.topk_ratio': must be in (0, 1]");
  EXPECT_MENTIONS(error_of("  mode: zenflow\n  zenflow:\n    select_strategy: step\n"
                           "    select_interval: 2\n    update_interval: 4\n"),
                  "config key 'exec.zenflow.select_interval' (2) must be at least "
                  "exec.zenflow.update_interval (4)");
  EXPECT_MENTIONS(error_of("  mode: zenflow\n  zenflow:\n    update_interval: 0\n"),
                  "'exec.zenflow.update_interval' (line 11): must be auto or an integer >= 1");
  EXPECT_MENTIONS(error_of("  mode: zenflow\n  zenflow:\n    select_strategy: weekly\n"),
                  "exec.zenflow.select_strategy");
  EXPECT_MENTIONS(error_of("  mode: zenflow\n  zenflow:\n    top_k: 0.1\n"),
                  "unknown key 'exec.zenflow.top_k'");
}

TEST_F(ZenFlowConfig, KeysWithoutZenFlowModeAreRefused) {
  EXPECT_MENTIONS(error_of("  mode: resident\n  zenflow:\n    topk_ratio: 0.2\n"),
                  "config key 'exec.zenflow.topk_ratio' is set, but exec.mode is resident");
  EXPECT_MENTIONS(error_of("  mode: streaming\n", {"exec.zenflow.update_interval=4"}),
                  "config key 'exec.zenflow.update_interval' is set, but exec.mode is streaming");
  // auto may choose zenflow, so the keys are kept for it.
  EXPECT_EQ(error_of("  mode: auto\n  zenflow:\n    topk_ratio: 0.2\n"), "<no error>");
}

}  // namespace
}  // namespace lt::train::testing
