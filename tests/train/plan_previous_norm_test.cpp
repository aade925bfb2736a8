// `lazytrain plan --model ... --clip-with-previous-norm`: the planner prices
// the updates during the backward (train.clip_with_previous_norm), as a
// train config with the key does (plan::PlanOptions::updates_during_backward,
// whose timelines test_plan's StatePlacement.*DuringTheBackward* check by hand).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

nlohmann::json plan_7b(const fs::path& tmp, const std::vector<std::string>& extra, int* status) {
  std::vector<std::string> args = {
      "plan",
      "--model",
      (fs::path(LT_SOURCE_DIR) / "bench/models/qwen2.5-7b").string(),
      "--hardware",
      (fs::path(LT_SOURCE_DIR) / "bench/profiles/h200_qwen2.5-7b_seq1024.yaml").string(),
      "--batch-size",
      "64",
      "--optimizer",
      "adamw8bit",
      "--time-limit",
      "10",
      "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::string text;
  const int code = run_program(args, tmp / "plan.log", &text);
  *status = code;
  if (code != 0 || text.find('{') == std::string::npos) return {{"output", text}};
  return nlohmann::json::parse(text.substr(text.find('{'), text.rfind('}') - text.find('{') + 1));
}

TEST(PlanPreviousNorm, TheFlagTakesTheUpdatesOffTheStepsCriticalPath) {
  TempDir tmp("plan_previous_norm");
  int status = 0;
  // Every stage streamed: stages on the device would take updates off the
  // CPU as well (below).
  const nlohmann::json exact = plan_7b(tmp.path(), {"--stream-every-stage"}, &status);
  ASSERT_EQ(status, 0) << exact.dump();
  const nlohmann::json early =
      plan_7b(tmp.path(), {"--clip-with-previous-norm", "--stream-every-stage"}, &status);
  ASSERT_EQ(status, 0) << early.dump();
  const double exact_opt = exact.at("predicted_split_s").at("optimizer").get<double>();
  const double early_opt = early.at("predicted_split_s").at("optimizer").get<double>();
  // The 7B's 8-bit updates (~1 s exposed behind the next forward alone)
  // mostly run beside the backward; the embedding's, made last and needed
  // first, stays exposed.
  EXPECT_GT(exact_opt, 0.5);
  EXPECT_LT(early_opt, exact_opt / 2);
  EXPECT_GT(early_opt, 0.0);
  EXPECT_LT(early.at("predicted_step_s").get<double>(), exact.at("predicted_step_s").get<double>());
  // With the whole H200 the planner keeps stages on the device (Note
  // [Stages on the device]), the embedding first: the GPU updates them, and
  // the CPU's updates of the rest are hidden behind the forward.
  const nlohmann::json kept = plan_7b(tmp.path(), {}, &status);
  ASSERT_EQ(status, 0) << kept.dump();
  ASSERT_FALSE(kept.at("stages_on_device").empty()) << kept.dump();
  EXPECT_EQ(kept.at("stages_on_device")[0], 0);
  EXPECT_LT(kept.at("predicted_split_s").at("optimizer").get<double>(), exact_opt / 2);
  EXPECT_LT(kept.at("predicted_step_s").get<double>(), exact.at("predicted_step_s").get<double>());
  // Both at once: the stages kept on the device update there during the
  // backward too, so the plan is priced no slower than either alone.
  const nlohmann::json both = plan_7b(tmp.path(), {"--clip-with-previous-norm"}, &status);
  ASSERT_EQ(status, 0) << both.dump();
  ASSERT_FALSE(both.at("stages_on_device").empty()) << both.dump();
  EXPECT_EQ(both.at("stages_on_device")[0], 0);
  EXPECT_LE(both.at("predicted_step_s").get<double>(), kept.at("predicted_step_s").get<double>());
  EXPECT_LE(both.at("predicted_step_s").get<double>(), early.at("predicted_step_s").get<double>());
  // Several processes: refused, as train.clip_with_previous_norm is.
  const nlohmann::json ranks =
      plan_7b(tmp.path(), {"--clip-with-previous-norm", "--gpus", "2"}, &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(ranks.dump().find("one process"), std::string::npos) << ranks.dump();
}

}  // namespace
}  // namespace lt::train::testing
