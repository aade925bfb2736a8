// `lazytrain plan --config` plans a GPU run on a machine without the GPU
// (PlanTarget::ProfiledGpu) from the exec.hardware profile: the device is
// cuda:0 and the host budget is the profile's host_memory_gb, not this
// machine's free memory (a figure no CI machine has free). `lazytrain train`
// (PlanTarget::ThisMachine) still refuses train.device cuda without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "core/device.h"
#include "exec/schedule.h"
#include "plan/hardware.h"
#include "plan/milp.h"
#include "support/errors.h"
#include "train/executor_choice.h"
#include "train/run_plan.h"
#include "train/state_placement.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class PlanElsewhere : public ::testing::Test {
 protected:
  PlanElsewhere() : tmp_("plan_elsewhere") {
    write_random_tokens(tmp_ / "data.jsonl", 16, 97, 3);
    write_fixture_config(tmp_ / "model", "llama", 4);
  }
  TrainConfig config(double profile_host_gb) {
    const fs::path profile = tmp_ / "gpu_machine.yaml";
    std::ofstream(profile) << "host_memory_gb: " << profile_host_gb << "\ngpu_memory_gb: 141\n";
    return fixture_config(tmp_ / "model", tmp_ / "data.jsonl", tmp_ / "out",
                          {"model.init=random", "train.batch_size=4", "train.device=cuda",
                           "train.dtype=bf16", "exec.mode=streaming", "exec.schedule=auto",
                           "exec.state_placement=auto", "exec.hardware=" + profile.string()});
  }
  models::ModelConfig model() const {
    return models::ModelConfig::from_file(tmp_ / "model" / "config.json");
  }
  TempDir tmp_;
};

bool any_line_has(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

TEST_F(PlanElsewhere, PlansTheProfiledGpuWithTheProfilesHost) {
  if (cuda_device_visible()) GTEST_SKIP() << "a GPU is visible: plans are for it";
  // 100,000 GB is more than any machine running this has free: had the
  // budget been capped by this machine's memory, the line would name that.
  const RunPlan p = resolve_run(config(100000), model(), PlanTarget::ProfiledGpu);
  EXPECT_TRUE(p.device.is_cuda());
  EXPECT_TRUE(any_line_has(p.reasons, "the hardware profile's host_memory_gb (100000.000 GB)"))
      << ::testing::PrintToString(p.reasons);
  EXPECT_TRUE(any_line_has(p.reasons, "this machine has none"));
  EXPECT_GT(p.predicted_step_s, 0);
}

// A schedule the planner did not choose gets a prediction from the same
// cost model: the planner's own schedule, written to a file and named,
// is predicted as the planner predicted it; a named all_gpu gets one too.
TEST_F(PlanElsewhere, ANamedScheduleIsPricedAsThePlannerPricedIt) {
  if (cuda_device_visible()) GTEST_SKIP() << "a GPU is visible: plans are for it";
  const RunPlan planned = resolve_run(config(100000), model(), PlanTarget::ProfiledGpu);
  ASSERT_GT(planned.predicted_step_s, 0);
  // With the profile's 141 GB the planner fuses a tail and keeps stages on
  // the device: the price must follow both.
  EXPECT_GT(planned.schedule.tail_blocks, 0);
  EXPECT_FALSE(planned.schedule.stages_on_device.empty());
  const fs::path file = tmp_ / "planned.json";
  std::ofstream(file) << exec::to_json(planned.schedule).dump();
  TrainConfig named = config(100000);
  named.exec.schedule = file.string();
  const RunPlan again = resolve_run(named, model(), PlanTarget::ProfiledGpu);
  EXPECT_EQ(exec::to_json(again.schedule), exec::to_json(planned.schedule));
  EXPECT_NEAR(again.predicted_step_s, planned.predicted_step_s, 1e-9 * planned.predicted_step_s);
  EXPECT_TRUE(any_line_has(again.reasons, "the planner's cost model"))
      << ::testing::PrintToString(again.reasons);
  named.exec.schedule = "all_gpu";
  EXPECT_GT(resolve_run(named, model(), PlanTarget::ProfiledGpu).predicted_step_s, 0);
}

// A named schedule the cost model cannot price (boundary 0 on the host:
// price_schedule refuses it rather than price it as kept) still plans, and
// says why it has no prediction.
TEST_F(PlanElsewhere, ANamedScheduleWithoutAPriceSaysWhyAndStillPlans) {
  if (cuda_device_visible()) GTEST_SKIP() << "a GPU is visible: plans are for it";
  if (!plan::have_milp_solver()) GTEST_SKIP() << "built without CBC";
  exec::Schedule s = exec::Schedule::all_gpu(static_cast<int>(model().num_hidden_layers));
  s.boundaries[0] = exec::Placement::Host;
  const fs::path file = tmp_ / "host0.json";
  std::ofstream(file) << exec::to_json(s).dump();
  TrainConfig named = config(100000);
  named.exec.schedule = file.string();
  const RunPlan p = resolve_run(named, model(), PlanTarget::ProfiledGpu);
  EXPECT_EQ(p.predicted_step_s, 0);
  EXPECT_EQ(p.schedule.boundaries[0], exec::Placement::Host);
  EXPECT_TRUE(any_line_has(p.reasons, "schedule: no predicted step ("))
      << ::testing::PrintToString(p.reasons);
  EXPECT_TRUE(any_line_has(p.reasons, "prices boundary 0 on the GPU or recomputed"))
      << ::testing::PrintToString(p.reasons);
}

// exec.mode auto compares the executors against the profile's GPU memory
// (this machine has no GPU to read free memory from): 141 GB holds this
// model resident.
TEST_F(PlanElsewhere, ModeAutoComparesWithTheProfilesGpu) {
  if (cuda_device_visible()) GTEST_SKIP() << "a GPU is visible: plans are for it";
  TrainConfig c = config(100000);
  c.exec.mode = "auto";
  const RunPlan p = resolve_run(c, model(), PlanTarget::ProfiledGpu);
  EXPECT_EQ(p.executor, exec::ExecutorKind::Resident);
  EXPECT_TRUE(any_line_has(p.reasons, "the gpu_memory_gb of " + c.exec.hardware))
      << ::testing::PrintToString(p.reasons);
}

// exec.mode resident as set, on the GPU a profile describes: its bf16 count
// (resident_budget on a GPU) is held to the profile's gpu_memory_gb as
// exec.mode auto's is (on a GPU of this machine, to its free memory, by the
// same code): far over it, refused naming the device and both figures;
// within it, resident as set.
TEST_F(PlanElsewhere, ASetResidentIsHeldToTheProfilesGpu) {
  if (cuda_device_visible()) GTEST_SKIP() << "a GPU is visible: plans are for it";
  TrainConfig c = config(100000);
  c.exec.mode = "resident";
  const int64_t need = resident_budget(c, model(), /*on_gpu=*/true).bytes(exec::MemorySpace::Gpu);
  const auto with_gpu = [&](double gpu_gb) {
    const fs::path profile = tmp_ / "small_gpu.yaml";
    std::ofstream(profile) << fmt::format("host_memory_gb: 100000\ngpu_memory_gb: {:.17g}\n",
                                          gpu_gb);
    TrainConfig small = c;
    small.exec.hardware = profile.string();
    return small;
  };
  const std::string refused = lt::testing::error_of([&] {
    resolve_run(with_gpu(static_cast<double>(need / 4) / 1e9), model(), PlanTarget::ProfiledGpu);
  });
  EXPECT_THAT(refused, ::testing::HasSubstr(fmt::format(
                           "exec.mode resident: train.batch_size 4 sequences of train.seq_len 32 "
                           "tokens, in micro-batches of 4 (train.grad_accum 1) need an estimated "
                           "{:.6g} GB ({} bytes) on cuda:0, over 1.15 times what the "
                           "gpu_memory_gb of {}",
                           need / 1e9, need, (tmp_ / "small_gpu.yaml").string())));
  EXPECT_THAT(refused, ::testing::HasSubstr(fmt::format("({} bytes))", need / 4)));
  const RunPlan fits = resolve_run(with_gpu(141), model(), PlanTarget::ProfiledGpu);
  EXPECT_EQ(fits.executor, exec::ExecutorKind::Resident);
  EXPECT_TRUE(fits.device.is_cuda());
}

// exec.hardware: defaults (the built-in H200 figures) plans as a named
// profile does: for their GPU, with their gpu_memory_gb and host_memory_gb,
// not this machine's. It was refused ("no CUDA device is visible"), while a
// profile file of the same figures planned.
TEST_F(PlanElsewhere, DefaultsPlanTheBuiltInGpu) {
  if (cuda_device_visible()) GTEST_SKIP() << "a GPU is visible: plans are for it";
  const plan::HardwareProfile defaults;
  TrainConfig c = config(100000);
  c.exec.hardware = "defaults";
  c.exec.mode = "auto";
  const RunPlan p = resolve_run(c, model(), PlanTarget::ProfiledGpu);
  EXPECT_TRUE(p.device.is_cuda());
  EXPECT_EQ(p.free_memory_of, FreeMemoryOf::TheProfile);
  EXPECT_TRUE(any_line_has(p.reasons,
                           "device: planned for the GPU of the built-in defaults (exec.hardware: "
                           "defaults, an H200's figures) (this machine has none)"))
      << ::testing::PrintToString(p.reasons);
  EXPECT_TRUE(any_line_has(p.reasons, fmt::format("the gpu_memory_gb of the built-in defaults "
                                                  "(exec.hardware: defaults, an H200's figures) "
                                                  "has {:g} GB",
                                                  defaults.gpu_memory_gb)))
      << ::testing::PrintToString(p.reasons);
  EXPECT_EQ(p.executor, exec::ExecutorKind::Resident);
  // Streaming, whose host budget is the defaults' host_memory_gb.
  c.exec.mode = "streaming";
  const RunPlan s = resolve_run(c, model(), PlanTarget::ProfiledGpu);
  EXPECT_TRUE(s.device.is_cuda());
  EXPECT_TRUE(any_line_has(
      s.reasons,
      fmt::format("the hardware profile's host_memory_gb ({:.3f} GB)", defaults.host_memory_gb)))
      << ::testing::PrintToString(s.reasons);
  EXPECT_GT(s.predicted_step_s, 0);
}

TEST_F(PlanElsewhere, TrainOnThisMachineStillRefusesAMissingGpu) {
  if (cuda_device_visible()) GTEST_SKIP() << "a GPU is visible";
  EXPECT_THAT(lt::testing::error_of([&] { resolve_run(config(100000), model()); }),
              ::testing::HasSubstr("no CUDA device is visible"));
}

}  // namespace
}  // namespace lt::train::testing
