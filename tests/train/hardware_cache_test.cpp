// Note [Profile by default] (train/hardware_cache.h): a run's measured
// profile is measured once per device, model shape and seq_len, then read;
// a damaged or mismatched cached file is measured again; an unwritable
// folder still gives the run its profile. The measurement is a stand-in
// that counts its calls (the real one needs a GPU).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "data/json_fields.h"
#include "plan/hardware.h"
#include "plan/milp.h"
#include "plan/schedule_price.h"
#include "support/scoped_env.h"
#include "train/hardware_cache.h"
#include "train/schedule_auto.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

using lt::testing::ScopedEnv;

class HardwareCache : public ::testing::Test {
 protected:
  HardwareCache() : tmp_("hardware_cache") {}
  models::ModelConfig model(const std::string& family = "llama") const {
    return models::ModelConfig::from_file(fixture(family) / "config.json");
  }
  // A profile as a measurement gives it: this model's stage times at seq_len.
  std::function<plan::HardwareProfile()> measure(const models::ModelConfig& m, int64_t seq_len) {
    return [this, m, seq_len] {
      ++measured_;
      plan::HardwareProfile hw;
      hw.gpu_tflops = 123.0 + measured_;
      plan::StageTimes t = plan::StageTimes::for_model(m, seq_len);
      t.device = "cuda";
      t.batch_sizes = {4, 8, 32};
      // Seconds at each size, as a measurement on a GPU writes them.
      t.embed_forward = {t.batch_sizes, {0.0005, 0.0009, 0.0033}};
      t.embed_backward = {t.batch_sizes, {0.0006, 0.001, 0.0034}};
      t.block_forward = {t.batch_sizes, {0.009, 0.017, 0.06}};
      t.block_backward = {t.batch_sizes, {0.018, 0.034, 0.12}};
      t.head_step = {t.batch_sizes, {0.007, 0.011, 0.035}};
      hw.stage_times = t;
      return hw;
    };
  }
  std::string dir() const { return (tmp_ / "cache").string(); }
  TempDir tmp_;
  int measured_ = 0;
};

TEST_F(HardwareCache, MeasuredOnceThenRead) {
  const CachedProfile first =
      ensure_profile(dir(), "NVIDIA H200", model(), 64, measure(model(), 64));
  EXPECT_TRUE(first.measured_now);
  EXPECT_EQ(measured_, 1);
  EXPECT_TRUE(first.notes.empty());
  const CachedProfile second =
      ensure_profile(dir(), "NVIDIA H200", model(), 64, measure(model(), 64));
  EXPECT_FALSE(second.measured_now);
  EXPECT_EQ(measured_, 1);
  EXPECT_EQ(first.path, second.path);
  // The file is the measured profile.
  const plan::HardwareProfile read = plan::HardwareProfile::from_file(second.path);
  EXPECT_DOUBLE_EQ(read.gpu_tflops, 124.0);
  ASSERT_TRUE(read.stage_times);
  EXPECT_EQ(read.stage_times->batch_sizes, (std::vector<int64_t>{4, 8, 32}));
  EXPECT_EQ(read.stage_times->block_backward.seconds, (std::vector<double>{0.018, 0.034, 0.12}));
}

// What a run with a fixed executor reads: only a usable profile, and it
// never measures.
TEST_F(HardwareCache, ALookupFindsOnlyAUsableProfile) {
  EXPECT_EQ(cached_profile(dir(), "gpu", model(), 64), "");
  const CachedProfile p = ensure_profile(dir(), "gpu", model(), 64, measure(model(), 64));
  EXPECT_EQ(cached_profile(dir(), "gpu", model(), 64), p.path);
  EXPECT_EQ(cached_profile(dir(), "gpu", model(), 128), "");
  EXPECT_EQ(cached_profile(dir(), "other gpu", model(), 64), "");
  std::ofstream(p.path, std::ios::trunc) << "gpu_tflops: [";  // damaged
  EXPECT_EQ(cached_profile(dir(), "gpu", model(), 64), "");
  EXPECT_EQ(measured_, 1);
}

// The "re-measured when the GPU or host changes": the driver and
// the host (CPU model, threads, memory, read from /proc and sysconf here)
// are part of the key, and the file name keeps the GPU's name readable.
TEST_F(HardwareCache, AnotherDriverOrHostIsMeasuredApart) {
  const std::string here = machine_identity("NVIDIA H200", "driver 13000");
  EXPECT_EQ(here.rfind("NVIDIA H200 | driver 13000 | host ", 0), 0u) << here;
  EXPECT_NE(here.find(" threads, "), std::string::npos) << here;
  EXPECT_NE(here.find(" GiB"), std::string::npos) << here;
  const std::string name = profile_cache_name(here, model(), 64);
  EXPECT_EQ(name.rfind("hardware-NVIDIA_H200-", 0), 0u) << name;
  EXPECT_EQ(name.find_first_of(" /\\:*?\"<>|"), std::string::npos) << name;
  EXPECT_NE(name, profile_cache_name(machine_identity("NVIDIA H200", "driver 12080"), model(), 64));
  // Same GPU and driver on another host (its identity string differs).
  EXPECT_NE(name, profile_cache_name("NVIDIA H200 | driver 13000 | host Other CPU, 64 threads, "
                                     "512 GiB",
                                     model(), 64));
  ensure_profile(dir(), here, model(), 64, measure(model(), 64));
  EXPECT_FALSE(ensure_profile(dir(), here, model(), 64, measure(model(), 64)).measured_now);
  ensure_profile(dir(), machine_identity("NVIDIA H200", "driver 12080"), model(), 64,
                 measure(model(), 64));
  EXPECT_EQ(measured_, 2);
}

TEST_F(HardwareCache, AnotherDeviceModelOrSeqLenIsMeasuredApart) {
  const std::string a = profile_cache_name("NVIDIA H200", model(), 64);
  EXPECT_NE(a, profile_cache_name("NVIDIA H100 80GB HBM3", model(), 64));
  EXPECT_NE(a, profile_cache_name("NVIDIA H200", model(), 128));
  EXPECT_NE(a, profile_cache_name("NVIDIA H200", model("qwen2"), 64));
  models::ModelConfig deeper = model();
  deeper.num_hidden_layers += 1;
  EXPECT_NE(a, profile_cache_name("NVIDIA H200", deeper, 64));
  // A file name a shell and every file system take.
  EXPECT_EQ(a.find_first_of(" /\\:*?\"<>|"), std::string::npos) << a;
  ensure_profile(dir(), "NVIDIA H200", model(), 64, measure(model(), 64));
  ensure_profile(dir(), "NVIDIA H200", model(), 128, measure(model(), 128));
  EXPECT_EQ(measured_, 2);
}

TEST_F(HardwareCache, ADamagedCachedFileIsMeasuredAgainWithANote) {
  std::filesystem::create_directories(dir());
  const std::string path =
      (std::filesystem::path(dir()) / profile_cache_name("gpu", model(), 64)).string();
  std::ofstream(path) << "gpu_tflops: [not, a, number\n";
  const CachedProfile p = ensure_profile(dir(), "gpu", model(), 64, measure(model(), 64));
  EXPECT_TRUE(p.measured_now);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_NE(p.notes[0].find(path), std::string::npos) << p.notes[0];
  EXPECT_NO_THROW(plan::HardwareProfile::from_file(p.path));
  // Replaced: the next run reads it.
  EXPECT_FALSE(ensure_profile(dir(), "gpu", model(), 64, measure(model(), 64)).measured_now);
}

TEST_F(HardwareCache, AFileOfAnotherModelIsMeasuredAgain) {
  std::filesystem::create_directories(dir());
  const std::string path =
      (std::filesystem::path(dir()) / profile_cache_name("gpu", model(), 64)).string();
  plan::HardwareProfile other;
  plan::StageTimes t = plan::StageTimes::for_model(model("qwen2"), 64);
  t.batch_sizes = {1, 2};
  other.stage_times = t;
  std::ofstream(path) << other.to_yaml();
  const CachedProfile p = ensure_profile(dir(), "gpu", model(), 64, measure(model(), 64));
  EXPECT_TRUE(p.measured_now);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_NE(p.notes[0].find("cannot be used"), std::string::npos) << p.notes[0];
}

TEST_F(HardwareCache, AnUnwritableFolderStillGivesTheRunItsProfile) {
  const std::string file = (tmp_ / "a-file").string();
  std::ofstream(file) << "x";
  const std::string below_a_file = file + "/cache";
  const CachedProfile p = ensure_profile(below_a_file, "gpu", model(), 64, measure(model(), 64));
  EXPECT_TRUE(p.measured_now);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_NE(p.notes[0].find("LT_CACHE_DIR"), std::string::npos) << p.notes[0];
  const plan::HardwareProfile read = plan::HardwareProfile::from_file(p.path);
  EXPECT_TRUE(read.stage_times);
  std::filesystem::remove(p.path);
}

TEST_F(HardwareCache, TheFolderFollowsTheEnvironment) {
  ScopedEnv cache("LT_CACHE_DIR", "/some/cache");
  EXPECT_EQ(hardware_cache_dir(), "/some/cache");
  ScopedEnv unset_cache("LT_CACHE_DIR", nullptr);
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(hardware_cache_dir(), "/xdg/lazytrain");
  ScopedEnv unset_xdg("XDG_CACHE_HOME", nullptr);
  ScopedEnv home("HOME", "/home/u");
  EXPECT_EQ(hardware_cache_dir(), "/home/u/.cache/lazytrain");
}

TEST_F(HardwareCache, DefaultsNameTheBuiltInFigures) {
  TrainConfig c;
  c.exec.hardware = kDefaultHardware;
  const plan::HardwareProfile hw = auto_hardware(c);
  EXPECT_DOUBLE_EQ(hw.gpu_tflops, plan::HardwareProfile{}.gpu_tflops);
  EXPECT_FALSE(hw.stage_times);
}

// Note [The run's CPU update rate]: what a run measured over what its plan
// priced is kept in the cached profile, so that pricing the same schedule
// again gives the measured rate (the cost model's rate by hand: the
// measured one); a rate as planned rewrites nothing; a profile that does not
// read is left as it is, with a note.
TEST_F(HardwareCache, TheNextPlanPricesTheUpdatesAtTheRateARunMeasured) {
  if (!plan::have_milp_solver()) GTEST_SKIP() << "built without CBC";
  const std::string path =
      ensure_profile(dir(), "NVIDIA H200", model(), 64, measure(model(), 64)).path;
  const exec::TrainSizes sizes{8, 64, exec::OptimizerStates::Fp32, 2};
  exec::Schedule s = exec::Schedule::all_gpu(static_cast<int>(model().num_hidden_layers));
  s.chunk_sequences = 4;
  const auto priced = [&] {
    return plan::price_schedule(model(), plan::HardwareProfile::from_file(path), sizes, s, false)
        .prediction;
  };
  const plan::StepPrediction before = priced();
  ASSERT_GT(before.cpu_update_params_per_s, 0);
  EXPECT_EQ(before.cpu_update_in_run_scale, 1);
  const double measured = 0.85 * before.cpu_update_params_per_s;
  const std::string kept = keep_cpu_update_rate(path, exec::OptimizerStates::Fp32, measured,
                                                before.cpu_update_params_per_s, 1);
  EXPECT_NE(kept.find("cpu_adam_in_run_scale in " + path), std::string::npos) << kept;
  const plan::StepPrediction after = priced();
  EXPECT_NEAR(after.cpu_update_params_per_s, measured, 1e-9 * measured);
  EXPECT_NEAR(after.cpu_update_in_run_scale, 0.85, 1e-12);
  EXPECT_GT(after.optimizer_s, before.optimizer_s);
  EXPECT_FALSE(plan::HardwareProfile::from_file(path).cpu_adam8bit_in_run_scale);
  // A run at the rate its plan priced (with the scale) keeps the file.
  const std::string text = data::read_whole_file(path);
  EXPECT_NE(keep_cpu_update_rate(path, exec::OptimizerStates::Fp32, measured * 1.01,
                                 after.cpu_update_params_per_s, after.cpu_update_in_run_scale)
                .find("(as planned)"),
            std::string::npos);
  EXPECT_EQ(data::read_whole_file(path), text);
  // A slower run again: its scale is against the unscaled rate, not the
  // scaled one (0.6 of the first price, not 0.6 x 0.85), and it weighs
  // half against the 0.85 kept before: the next plan prices 0.725.
  const std::string again =
      keep_cpu_update_rate(path, exec::OptimizerStates::Fp32, 0.6 * before.cpu_update_params_per_s,
                           after.cpu_update_params_per_s, after.cpu_update_in_run_scale);
  EXPECT_NE(again.find("0.725x the profile's rate"), std::string::npos) << again;
  EXPECT_NE(again.find("the mean of this run's 0.600x and the 0.850x kept before"),
            std::string::npos)
      << again;
  EXPECT_NEAR(priced().cpu_update_params_per_s, 0.725 * before.cpu_update_params_per_s,
              1e-9 * before.cpu_update_params_per_s);
  // adamw8bit's scale is its own key.
  keep_cpu_update_rate(path, exec::OptimizerStates::EightBit, 1.5e9, 3e9, 1);
  EXPECT_NEAR(*plan::HardwareProfile::from_file(path).cpu_adam8bit_in_run_scale, 0.5, 1e-12);
  EXPECT_NEAR(*plan::HardwareProfile::from_file(path).cpu_adam_in_run_scale, 0.725, 1e-9);
  {
    std::ofstream damaged(path);
    damaged << "gpu_tflops: [";
  }
  const std::string note = keep_cpu_update_rate(path, exec::OptimizerStates::Fp32, 1e9, 2e9, 1);
  EXPECT_NE(note.find("not kept for the next plan"), std::string::npos) << note;
  EXPECT_EQ(data::read_whole_file(path), "gpu_tflops: [");
}

}  // namespace
}  // namespace lt::train::testing
