// `lazytrain plan --model ... --clip-with-previous-norm`: the planner prices
// the updates during the backward (train.clip_with_previous_norm), as a
// train config with the key does (plan::PlanOptions::updates_during_backward,
// whose timelines test_plan's StatePlacement.*DuringTheBackward* check by hand).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/device.h"
#include "plan/milp.h"
#include "train/run_plan.h"
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

// Note [The previous norm's hint]: the 3B at 24 GB on the H200's profile
// exposes part of its CPU updates with exact clipping, and the run's plan
// says what train.clip_with_previous_norm would be predicted to take a
// step: the prediction the run with the option then plans. Not said with
// the option on, nor with clipping off (nothing waits for a norm).
TEST(PlanPreviousNorm, ExactClippingSaysWhatThePreviousNormWouldGain) {
  if (cuda_device_visible()) GTEST_SKIP() << "a GPU is visible: plans are for it";
  if (!plan::have_milp_solver()) GTEST_SKIP() << "built without CBC";
  TempDir tmp("previous_norm_hint");
  write_random_tokens(tmp / "data.jsonl", 4, 97, 3);
  const fs::path model_dir = fs::path(LT_SOURCE_DIR) / "bench/models/qwen2.5-3b";
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> overrides = {
        "model.init=random",
        "train.grad_clip=1",
        "train.batch_size=64",
        "train.seq_len=1024",
        "train.device=cuda",
        "train.dtype=bf16",
        "exec.mode=auto",
        "exec.device_memory_gb=24",
        "exec.hardware=" +
            (fs::path(LT_SOURCE_DIR) / "bench/profiles/h200_qwen2.5-3b_seq1024.yaml").string()};
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    const TrainConfig c = fixture_config(model_dir, tmp / "data.jsonl", tmp / "out", overrides);
    return resolve_run(c, models::ModelConfig::from_file(model_dir / "config.json"),
                       PlanTarget::ProfiledGpu);
  };
  const auto hint_of = [](const RunPlan& p) {
    for (const std::string& line : p.reasons)
      if (line.find("train.clip_with_previous_norm: true (each step") != std::string::npos)
        return line;
    return std::string();
  };
  const RunPlan exact = run({});
  const std::string hint = hint_of(exact);
  ASSERT_FALSE(hint.empty()) << ::testing::PrintToString(exact.reasons);
  const size_t at = hint.find("predicted ");
  ASSERT_NE(at, std::string::npos) << hint;
  const double hinted_s = std::stod(hint.substr(at + 10));
  EXPECT_LT(hinted_s, exact.predicted_step_s);
  const RunPlan early = run({"train.clip_with_previous_norm=true"});
  EXPECT_NEAR(early.predicted_step_s, hinted_s, 1e-4) << hint;
  EXPECT_TRUE(hint_of(early).empty());
  EXPECT_TRUE(hint_of(run({"train.grad_clip=0"})).empty());
}

}  // namespace
}  // namespace lt::train::testing
