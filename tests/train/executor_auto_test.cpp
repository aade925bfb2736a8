// exec.mode auto among resident, ZenFlow, offload and streaming: each
// candidate's fit is its own memory count against the device, its time the
// executor cost model's (plan/executor_costs.h), and the choice the fastest
// that fits, with the table printed among the plan's reasons. Checked on the
// CPU stand-in, whose capacity is exec.device_memory_gb, against the
// candidates' own byte counts and predictions, and against hand arithmetic
// of the cost model.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sstream>

#include "exec/memory_budget.h"
#include "plan/executor_costs.h"
#include "train/executor_auto.h"
#include "train/run_plan.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class ExecutorAuto : public ::testing::Test {
 protected:
  ExecutorAuto() : tmp_("executor_auto") { write_random_tokens(tmp_ / "data.jsonl", 8, 97, 2); }
  TrainConfig config(std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), {"train.batch_size=8", "train.grad_accum=2"});
    return fixture_config(fixture("llama"), tmp_ / "data.jsonl", tmp_ / "out", overrides);
  }
  models::ModelConfig model() const {
    return models::ModelConfig::from_file(fixture("llama") / "config.json");
  }
  // Among the reasons, or (a run on the CPU) the table of the GPU's prices.
  bool has_line(const RunPlan& p, const std::string& text) const {
    for (const auto* lines : {&p.reasons, &p.cpu_price_table})
      for (const auto& r : *lines)
        if (r.find(text) != std::string::npos) return true;
    return false;
  }
  TempDir tmp_;
};

TEST_F(ExecutorAuto, TheFastestThatFitsIsChosenAndTheTableIsPrinted) {
  // No limit: everything fits; resident has no copies and no CPU update.
  const RunPlan open = resolve_run(config({}), model());
  EXPECT_EQ(open.executor, exec::ExecutorKind::Resident);
  // On the CPU the table says whose step it predicts, in a unit that shows
  // the fixture's microseconds (0.000 s once).
  EXPECT_TRUE(
      has_line(open, "exec.mode auto: predicted step per executor on the hardware profile's GPU"));
  EXPECT_FALSE(has_line(open, "   0.000 s ")) << ::testing::PrintToString(open.reasons);
  EXPECT_TRUE(has_line(open, "  zenflow"));
  EXPECT_TRUE(has_line(open, "  offload"));
  EXPECT_EQ(open.predicted_step_s, 0) << "the cost model is of a GPU: a CPU run is not predicted";

  // A device just big enough for ZenFlow but not resident: the candidates'
  // own counts decide, and ZenFlow (no synchronous CPU update) beats offload.
  const ExecutorChoice unlimited = choose_for_run(config({}), model(), Device::cpu());
  const auto all = whole_model_candidates(config({}), model(), Device::cpu(), unlimited);
  ASSERT_EQ(all.size(), 3u);
  const int64_t zen_bytes = all[1].gpu_bytes, resident_bytes = all[0].gpu_bytes;
  ASSERT_LT(zen_bytes, resident_bytes) << "the fixture's resident count should be the larger";
  const double gb = static_cast<double>(zen_bytes + resident_bytes) / 2 / 1e9;
  const RunPlan capped =
      resolve_run(config({"exec.device_memory_gb=" + std::to_string(gb)}), model());
  EXPECT_TRUE(has_line(capped, "streaming")) << "the planner's streaming plan is compared";
  const auto candidates = whole_model_candidates(
      config({"exec.device_memory_gb=" + std::to_string(gb)}), model(), Device::cpu(),
      choose_for_run(config({"exec.device_memory_gb=" + std::to_string(gb)}), model(),
                     Device::cpu()));
  EXPECT_FALSE(candidates[0].fits);
  EXPECT_TRUE(candidates[1].fits);
  const ExecutorCandidate* best = fastest_fitting(candidates);
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->executor, exec::ExecutorKind::ZenFlow);
  // Streaming wins only where the planner predicts it faster.
  if (capped.executor == exec::ExecutorKind::ZenFlow) {
    EXPECT_EQ(capped.predicted_step_s, 0) << "not predicted on the CPU";
  } else {
    EXPECT_EQ(capped.executor, exec::ExecutorKind::Streaming);
    EXPECT_LE(capped.predicted_step_s, best->step_s);
  }
}

// The log's lines that start with "executor: ".
std::vector<std::string> executor_lines(const std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("executor: ", 0) == 0) lines.push_back(line);
  return lines;
}

// A run on the CPU printed the GPU's predicted steps (microseconds, 0.000 s
// of compute) in its log: they stay with `lazytrain plan`, and the log
// names the executor once with why. It named it twice, the second time
// "(the fastest that fits on the hardware profile's GPU, which this CPU
// run chooses as; ...)": with no limit on the CPU every executor fits, and
// the one line says so.
TEST_F(ExecutorAuto, ACpuRunsLogLeavesTheGpusPredictionsOut) {
  const RunPlan p = resolve_run(config({}), model());
  ASSERT_FALSE(p.cpu_price_table.empty());
  ::testing::internal::CaptureStderr();
  train_quietly(config({"train.steps=1", "exec.mode=auto"}));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(log.find("predicted step per executor"), std::string::npos) << log;
  EXPECT_EQ(log.find("  zenflow"), std::string::npos) << log;
  const std::vector<std::string> lines = executor_lines(log);
  ASSERT_EQ(lines.size(), 1u) << log;
  EXPECT_EQ(lines[0].rfind("executor: resident (resident needs ", 0), 0u) << lines[0];
  EXPECT_TRUE(lines[0].ends_with(" and the CPU (no exec.device_memory_gb) sets no limit)"))
      << lines[0];
  EXPECT_EQ(log.find("its updates are not AdamW's"), std::string::npos) << log;
}

// Where a limit on the CPU leaves resident out and the GPU's prediction
// picks ZenFlow (its update every 16 steps predicted about 0.5 us a step
// on the default profile, the planner's streaming schedule 1.5 us), the
// memory's line ("executor: streaming (resident would need ...)") becomes
// that pick's: one line, not two that contradict.
TEST_F(ExecutorAuto, ACpuRunsOneExecutorLineSaysWhatThePredictionPicked) {
  const ExecutorChoice unlimited = choose_for_run(config({}), model(), Device::cpu());
  const auto all = whole_model_candidates(config({}), model(), Device::cpu(), unlimited);
  const double gb = static_cast<double>(all[1].gpu_bytes + all[0].gpu_bytes) / 2 / 1e9;
  const TrainConfig capped = config({"exec.device_memory_gb=" + std::to_string(gb),
                                     "exec.zenflow.update_interval=16", "exec.hardware=defaults"});
  const RunPlan p = resolve_run(capped, model());
  ASSERT_EQ(p.executor, exec::ExecutorKind::ZenFlow) << ::testing::PrintToString(p.reasons);
  std::string reasons;
  for (const std::string& r : p.reasons) reasons += r + "\n";
  const std::vector<std::string> lines = executor_lines(reasons);
  ASSERT_EQ(lines.size(), 1u) << reasons;
  const std::string reason = choose_for_run(capped, model(), Device::cpu()).reason;
  EXPECT_EQ(reason.rfind("resident would need ", 0), 0u) << reason;
  EXPECT_EQ(lines[0], "executor: zenflow (" + reason +
                          "; of the executors that fit, zenflow is the fastest the cost model "
                          "predicts for the hardware profile's GPU, whose choice a CPU run "
                          "takes; `lazytrain plan` lists the predictions)");
  // ZenFlow trains otherwise than AdamW, which `auto` did not ask for: said,
  // with the exact executors that fit (offload here; streaming is planned).
  EXPECT_MENTIONS(reasons,
                  "zenflow: its updates are not AdamW's: each step updates on the device only the "
                  "10% of each weight's columns with the largest gradients "
                  "(exec.zenflow.topk_ratio), the rest on the CPU every 16 steps "
                  "(exec.zenflow.update_interval), so the losses differ from an exact run's; for "
                  "exact AdamW set exec.mode: offload (predicted ");
  EXPECT_MENTIONS(reasons, "), or streaming (predicted ");
}

// exec.mode offload or zenflow as set, with exec.device_memory_gb under the
// model's weights and gradients, started (loading the weights) and failed
// at its first step with advice for streaming schedules. It is refused
// before training, the weights counted against the fixture's parameters
// (f32 on the CPU, two copies); a device that just holds the run's
// measured peak runs it, the estimate's excess warned.
TEST_F(ExecutorAuto, ASetOffloadOrZenFlowPastTheDeviceIsRefusedBeforeTraining) {
  const int64_t weights_and_gradients = model().num_parameters() * 4 * 2;
  for (const std::string mode : {"offload", "zenflow"}) {
    const auto run = [&](const std::string& name, const std::string& limit_gb) {
      std::vector<std::string> overrides = {"train.steps=1", "exec.mode=" + mode};
      if (!limit_gb.empty()) overrides.push_back("exec.device_memory_gb=" + limit_gb);
      TrainConfig c = config(overrides);
      c.out.dir = (tmp_ / (mode + "_" + name)).string();
      return c;
    };
    train_quietly(run("open", ""));
    const std::vector<nlohmann::json> open = read_metrics(tmp_ / (mode + "_open"));
    ASSERT_EQ(open.size(), 1u);
    const double peak_gb = open[0]["peak_bytes"]["device"].get<double>() / 1e9;
    ASSERT_GT(peak_gb * 1e9, weights_and_gradients);
    const std::string under =
        fmt::format("{:.9f}", static_cast<double>(weights_and_gradients) * 0.95 / 1e9);
    const std::string error = training_error(run("under", under));
    EXPECT_MENTIONS(error, "exec.mode " + mode +
                               " keeps the whole model's weights and gradients on the device");
    // ZenFlow's columns: an f32 master, m and v for topk_ratio 0.1 of them.
    const int64_t columns = mode == "zenflow" ? (model().num_parameters() + 9) / 10 * 12 : 0;
    EXPECT_MENTIONS(error, fmt::format("({} bytes) on cpu", weights_and_gradients + columns));
    EXPECT_MENTIONS(error, "Set exec.mode streaming (or auto)");
    EXPECT_FALSE(fs::exists(tmp_ / (mode + "_under") / "metrics.jsonl")) << error;
    const std::string held = fmt::format("{:.9f}", peak_gb * 1.02);
    try {
      train_quietly(run("held", held));
    } catch (const Error& e) {
      ADD_FAILURE() << mode << " at " << held << " GB: " << e.what();
    }
  }
}

// exec.micro_batch chunks the streaming executor's micro-batches; the
// whole-model executors dropped it without a word.
TEST_F(ExecutorAuto, AChunkTheExecutorDoesNotUseIsSaid) {
  const auto said = [&](const std::string& mode) {
    const RunPlan p = resolve_run(config({"exec.mode=" + mode, "exec.micro_batch=2"}), model());
    return has_line(p, "exec.micro_batch 2: not used by the " + mode +
                           " executor, which runs whole micro-batches of 4 sequences "
                           "(train.batch_size 8 / train.grad_accum 2)");
  };
  EXPECT_TRUE(said("resident"));
  EXPECT_TRUE(said("offload"));
  EXPECT_FALSE(said("streaming"));
  EXPECT_FALSE(has_line(resolve_run(config({"exec.mode=streaming", "exec.micro_batch=2"}), model()),
                        "not used by"));
}

// ZenFlow's selective updates are another training than AdamW's: auto
// takes it only where resident does not fit. A GPU run of a tiny model,
// its resident and ZenFlow steps predicted alike to the microsecond, ran
// ZenFlow (and its losses left the CPU f32 run's by 7%).
TEST_F(ExecutorAuto, ZenFlowIsNotTakenWhereResidentFits) {
  const ExecutorChoice unlimited = choose_for_run(config({}), model(), Device::cpu());
  auto all = whole_model_candidates(config({}), model(), Device::cpu(), unlimited);
  ASSERT_EQ(all.size(), 3u);
  ASSERT_EQ(all[1].executor, exec::ExecutorKind::ZenFlow);
  EXPECT_TRUE(all[1].fits);
  EXPECT_FALSE(all[1].eligible);
  EXPECT_NE(all[1].detail.find("(not taken: resident fits"), std::string::npos) << all[1].detail;
  // Faster by any margin, it is still passed over while resident fits.
  all[1].step_s = all[0].step_s / 2;
  all[2].step_s = all[0].step_s * 2;
  ASSERT_NE(fastest_fitting(all), nullptr);
  EXPECT_EQ(fastest_fitting(all)->executor, exec::ExecutorKind::Resident);
  // Where resident does not fit, ZenFlow may be taken.
  const int64_t zen_bytes = all[1].gpu_bytes, resident_bytes = all[0].gpu_bytes;
  const TrainConfig capped =
      config({"exec.device_memory_gb=" + std::to_string((zen_bytes + resident_bytes) / 2 / 1e9)});
  const auto some = whole_model_candidates(capped, model(), Device::cpu(),
                                           choose_for_run(capped, model(), Device::cpu()));
  EXPECT_FALSE(some[0].fits);
  EXPECT_TRUE(some[1].fits);
  EXPECT_TRUE(some[1].eligible);
}

// The cost model's arithmetic, by hand: offload waits for every gradient
// down, the CPU update and every weight up; ZenFlow pays the copies once a
// window, on both links at once, and the CPU update only where it is longer
// than the window's steps.
TEST_F(ExecutorAuto, OffloadAndZenFlowPredictionsByHand) {
  const models::ModelConfig m = model();
  exec::TrainSizes sizes;
  sizes.batch_size = 8;
  sizes.seq_len = 16;
  plan::HardwareProfile hw;
  hw.d2h_gbps = 10;
  hw.h2d_gbps = 20;
  hw.bidir_gbps = 8;
  hw.cpu_adam_gparams_per_s = 1e-3;  // slow enough to show
  hw.gpu_adam_gparams_per_s = 0.02;
  hw.gpu_adam8bit_gparams_per_s = 1e6;  // not this run's optimizer: unused
  const plan::CostModel cost = plan::make_cost_model(m, hw, sizes, 4, 8);
  const double n = static_cast<double>(m.num_parameters());
  const double gb = n * 2 / 1e9;
  const double compute = cost.embed_s + m.num_hidden_layers * cost.block_train_s + cost.head_step_s;
  const plan::ExecutorTime off = plan::predict_offload(cost);
  EXPECT_DOUBLE_EQ(off.compute_s, compute);
  EXPECT_DOUBLE_EQ(off.copies_s, gb / 10 + gb / 20);
  EXPECT_DOUBLE_EQ(off.optimizer_s, n / 1e6);
  const plan::ExecutorTime zen = plan::predict_zenflow(cost, 0.1, 4);
  EXPECT_DOUBLE_EQ(zen.copies_s, gb / 8 / 4);
  const double device = 0.1 * n / 0.02e9;
  EXPECT_NEAR(zen.optimizer_s, device + (n / 1e6 - 4 * (compute + gb / 8 / 4)) / 4, 1e-12);
  // A fixed window: the copies go beside the last micro-batch's backward
  // (2/3 of its share of the compute: micro-batches of 4 of 8 sequences
  // are 2), and only what outlasts it is waited for.
  const double last_backward = compute / 2 * 2 / 3;
  const plan::ExecutorTime known = plan::predict_zenflow(cost, 0.1, 4, true);
  EXPECT_NEAR(known.copies_s, std::max(0.0, gb / 8 - last_backward) / 4, 1e-15);
  EXPECT_LE(known.step_s, zen.step_s);
  // Resident: the compute, then the device's update of every parameter at
  // the rate of the run's optimizer.
  const plan::ExecutorTime resident = plan::predict_resident(cost);
  EXPECT_DOUBLE_EQ(resident.optimizer_s, n / 0.02e9);
  EXPECT_DOUBLE_EQ(resident.step_s, compute + n / 0.02e9);
  sizes.optimizer = exec::OptimizerStates::EightBit;
  hw.gpu_adam8bit_gparams_per_s = 0.05;
  hw.cpu_adam8bit_gparams_per_s = 1e-3;
  const plan::CostModel eight_bit = plan::make_cost_model(m, hw, sizes, 4, 8);
  EXPECT_DOUBLE_EQ(plan::predict_resident(eight_bit).optimizer_s, n / 0.05e9);
  // ZenFlow's top-k columns update with f32 AdamW on the device whatever the
  // run's optimizer (its CPU update is the run's).
  EXPECT_NEAR(plan::predict_zenflow(eight_bit, 0.1, 4).optimizer_s, zen.optimizer_s, 1e-12);
}

}  // namespace
}  // namespace lt::train::testing
