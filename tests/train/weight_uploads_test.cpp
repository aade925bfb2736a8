// exec.weight_uploads for a GPU run's sizes (train/state_placement.h,
// resolve_host_placement): the host bytes of the streaming executor with
// every stage in host memory and every boundary on the GPU, counted by hand
// per parameter (AdamW): f32 master 4, m and v 8, the gradient slab 2, and
// with bf16 copies their 2 more: 16n, or 14n with f32 uploads. So:
//  - auto under a cap of 16n keeps the bf16 copies;
//  - auto under 16n - 1 takes the f32 masters, with nothing on disk;
//  - auto under a cap that needs disk either way takes the f32 masters,
//    with fewer stages on disk than bf16 would need;
//  - bf16 as set keeps the copies and moves stages to disk instead;
//  - the CPU stand-in (which uploads its f32 masters as they are) never
//    reports f32 uploads.
// And the planner prices an f32 upload at 4 bytes a parameter, its
// gradients still at the compute dtype's 2.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "exec/memory_budget.h"
#include "plan/cost_model.h"
#include "train/executor_choice.h"
#include "train/state_placement.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class WeightUploads : public ::testing::Test {
 protected:
  WeightUploads() : tmp_("weight_uploads") {
    write_random_tokens(tmp_ / "data.jsonl", 16, 97, 3);
    write_fixture_config(tmp_ / "model", "llama", 12);
    model_ = models::ModelConfig::from_file(tmp_ / "model" / "config.json");
  }
  TrainConfig config(int64_t host_cap, const std::string& uploads = "auto") {
    return fixture_config(
        tmp_ / "model", tmp_ / "data.jsonl", tmp_ / "out",
        {"model.init=random", "train.batch_size=4", "exec.mode=streaming",
         "exec.state_placement=auto", "exec.weight_uploads=" + uploads,
         fmt::format("exec.host_memory_gb={:.17g}", static_cast<double>(host_cap) / 1e9)});
  }
  HostPlacement place(const TrainConfig& c, bool on_gpu) {
    exec::TrainSizes sizes = streaming_sizes(c, /*stand_in=*/!on_gpu);
    std::vector<std::string> reasons;
    return resolve_host_placement(
        c, model_, sizes, exec::Schedule::all_gpu(static_cast<int>(model_.num_hidden_layers)), 0,
        FreeMemoryOf::ThisMachine, reasons);
  }
  static int on_disk(const HostPlacement& p) {
    return static_cast<int>(std::count(p.states_on_disk.begin(), p.states_on_disk.end(), true));
  }
  int64_t n() const { return model_.num_parameters(); }
  TempDir tmp_;
  models::ModelConfig model_;
};

TEST_F(WeightUploads, TheHostCountsAreTheHandCounts) {
  exec::TrainSizes sizes = streaming_sizes(config(16 * n()), /*stand_in=*/false);
  ASSERT_TRUE(sizes.on_gpu);
  ASSERT_EQ(sizes.compute_bytes, 2);
  const exec::Schedule all_gpu = exec::Schedule::all_gpu(12);
  EXPECT_EQ(exec::bytes_needed(model_, sizes, all_gpu).bytes(exec::MemorySpace::Host), 16 * n());
  const int64_t gpu = exec::bytes_needed(model_, sizes, all_gpu).bytes(exec::MemorySpace::Gpu);
  sizes.f32_weight_uploads = true;
  EXPECT_EQ(exec::bytes_needed(model_, sizes, all_gpu).bytes(exec::MemorySpace::Host), 14 * n());
  EXPECT_EQ(exec::bytes_needed(model_, sizes, all_gpu).bytes(exec::MemorySpace::Gpu),
            gpu + exec::kUploadStagingBytes);
}

TEST_F(WeightUploads, AutoKeepsTheCopiesWhileEverythingFits) {
  const HostPlacement p = place(config(16 * n()), true);
  EXPECT_FALSE(p.f32_weight_uploads);
  EXPECT_EQ(on_disk(p), 0);
}

TEST_F(WeightUploads, AutoUploadsTheMastersRatherThanUseTheDisk) {
  const HostPlacement p = place(config(16 * n() - 1), true);
  EXPECT_TRUE(p.f32_weight_uploads);
  EXPECT_EQ(on_disk(p), 0);
  // Short even with f32 uploads: both need the disk, f32 fewer stages.
  const HostPlacement both = place(config(14 * n() - 1), true);
  const HostPlacement copies = place(config(14 * n() - 1, "bf16"), true);
  EXPECT_TRUE(both.f32_weight_uploads);
  EXPECT_FALSE(copies.f32_weight_uploads);
  EXPECT_GT(on_disk(both), 0);
  EXPECT_LT(on_disk(both), on_disk(copies));
}

TEST_F(WeightUploads, Bf16AsSetMovesStatesToDiskInstead) {
  const HostPlacement p = place(config(16 * n() - 1, "bf16"), true);
  EXPECT_FALSE(p.f32_weight_uploads);
  EXPECT_GT(on_disk(p), 0);
}

TEST_F(WeightUploads, TheStandInNeverReportsF32Uploads) {
  EXPECT_FALSE(place(config(16 * n(), "f32"), false).f32_weight_uploads);
}

TEST_F(WeightUploads, ThePlannerPricesFourBytesAParameterUp) {
  exec::TrainSizes sizes = streaming_sizes(config(16 * n()), /*stand_in=*/false);
  const plan::HardwareProfile hw;
  const plan::CostModel copies = plan::make_cost_model(model_, hw, sizes, 0, 8);
  sizes.f32_weight_uploads = true;
  const plan::CostModel f32 = plan::make_cost_model(model_, hw, sizes, 0, 8);
  const double block = static_cast<double>(exec::block_parameters(model_));
  EXPECT_DOUBLE_EQ(copies.block_weight_gb, block * 2 / 1e9);
  EXPECT_DOUBLE_EQ(f32.block_weight_gb, block * 4 / 1e9);
  EXPECT_DOUBLE_EQ(f32.block_gradient_gb, block * 2 / 1e9);
}

}  // namespace
}  // namespace lt::train::testing
