// The cost model's FLOP counts and step prediction against figures worked
// out by hand for the tiny Llama (tiny_model.h).
#include <gtest/gtest.h>

#include "plan/cost_model.h"
#include "plan/tiny_model.h"

namespace lt::plan {
namespace {

// B = 2, T = 8: 16 tokens.
//   block: 2 FLOPs x 36992 parameters x 16 tokens = 1183744, plus causal
//   attention 2 x B x T^2 x heads x head_dim = 2 * 2 * 64 * 4 * 16 = 16384.
//   head: 2 x vocab 100 x hidden 64 x 16 tokens = 204800.
TEST(CostModel, FlopCounts) {
  const exec::TrainSizes sizes{2, 8};
  EXPECT_EQ(block_forward_flops(testing::tiny_llama(), sizes), 1183744 + 16384);
  EXPECT_EQ(head_forward_flops(testing::tiny_llama(), sizes), 204800);
  // down_proj: 2 x FFN 128 x hidden 64 x 16 tokens.
  EXPECT_EQ(block_output_gemm_flops(testing::tiny_llama(), sizes), 262144);
}

PlanSolution all_kept(int L) {
  PlanSolution s;
  s.feasible = true;
  s.placements.assign(L + 1, exec::Placement::Gpu);
  return s;
}

TEST(CostModel, ComputeIsFourBlockForwardsLessTheUnreadGemmAndThreeHeadForwards) {
  HardwareProfile hw;
  hw.gpu_tflops = 1e-6;             // 10^6 FLOP/s: the block forward takes 1.200128 s
  hw.cpu_adam_gparams_per_s = 1e3;  // the optimizer hides entirely
  const CostModel m = make_cost_model(testing::tiny_llama(), hw, {2, 8}, 0, 4);
  EXPECT_DOUBLE_EQ(m.block_forward_s, 1.200128);
  EXPECT_DOUBLE_EQ(m.head_forward_s, 0.2048);
  const PlanInstance in = build_instance(m);
  const StepPrediction p = predict_step(m, in, all_kept(2));
  // 2 blocks x (forward + re-forward + backward = 4 forwards, less the
  // re-forward's down_proj, 0.262144 s) + head step (3). Resident's block
  // keeps that GEMM.
  EXPECT_NEAR(p.compute_s, 2 * (4 * 1.200128 - 0.262144) + 3 * 0.2048, 1e-12);
  EXPECT_NEAR(m.block_train_s, 3 * 1.200128, 1e-12);
  EXPECT_EQ(p.recompute_s, 0);
  EXPECT_EQ(p.exposed_activations_s, 0);
  // The first block's weights (36992 x 2 B) arrive before compute.
  EXPECT_NEAR(p.exposed_weights_s, 36992 * 2 / 53.3e9, 1e-15);
  EXPECT_NEAR(p.step_s, p.compute_s + p.exposed_weights_s + p.optimizer_s, 1e-12);
}

TEST(CostModel, OptimizerWaitsBeforeEachStageForward) {
  // 1000 parameters/s. Stages in forward order: embedding (6400
  // parameters: 6.4 s), block 0 and block 1 (36.992 s each), head (its
  // final norm and untied lm_head, 6464: 6.464 s).
  HardwareProfile hw;
  hw.cpu_adam_gparams_per_s = 1e-6;
  // Compute all but free: the next forward hides nothing, so the whole
  // update is exposed: 86848 parameters / 1000 = 86.848 s.
  CostModel m = make_cost_model(testing::tiny_llama(), hw, {2, 8}, 0, 4);
  PlanInstance in = build_instance(m);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).optimizer_s, 86.848, 1e-6);
  // Slow compute (block forward 1200 s): only block 0's forward waits, for
  // the embedding's and its own update: 6.4 + 36.992 = 43.392 s.
  hw.gpu_tflops = 1e-9;
  m = make_cost_model(testing::tiny_llama(), hw, {2, 8}, 0, 4);
  in = build_instance(m);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).optimizer_s, 43.392, 1e-6);
}

// Note [The fused tail] (exec/streaming_plan.cpp): the tiny Llama with 4
// blocks, block forward 1.200128 s (down_proj 0.262144 s of it).
TEST(CostModel, ATailTrainsItsBlocksAsResidentDoesAndRecomputesOnlyBelowIt) {
  std::string json = testing::kTinyLlamaJson;
  const std::string two = "\"num_hidden_layers\": 2";
  json.replace(json.find(two), two.size(), "\"num_hidden_layers\": 4");
  const models::ModelConfig config = models::ModelConfig::from_json_text(json, "tiny4");
  HardwareProfile hw;
  hw.gpu_tflops = 1e-6;
  hw.cpu_adam_gparams_per_s = 1e3;
  CostModel m = make_cost_model(config, hw, {2, 8}, 0, 8);
  const PlanInstance in = build_instance(m);
  // Boundaries 1-3 recomputed: the solver prices one segment from
  // boundary 0 to 4, three block forwards.
  PlanSolution sol = all_kept(4);
  for (int b : {1, 2, 3}) sol.placements[static_cast<size_t>(b)] = exec::Placement::Recompute;
  sol.recompute_s = in.recompute_s(0, 4);
  EXPECT_NEAR(sol.recompute_s, 3 * 1.200128, 1e-12);
  const StepPrediction apart = predict_step(m, in, sol);
  EXPECT_NEAR(apart.recompute_s, 3 * 1.200128, 1e-12);
  // A tail of 2 (blocks 2 and 3): each trains as resident does, three
  // forwards with down_proj, instead of a no-grad forward and a backward
  // use (four forwards less down_proj): 1.200128 - 0.262144 s less each.
  // Boundary 2 is the tail's input, kept from its forward, and boundary 3
  // never exists: block 1's backward recomputes boundary 1 alone.
  m.tail_blocks = 2;
  const StepPrediction tail = predict_step(m, in, sol);
  EXPECT_NEAR(apart.compute_s - tail.compute_s, 2 * (1.200128 - 0.262144), 1e-9);
  EXPECT_NEAR(tail.recompute_s, 1.200128, 1e-12);
  // Updates at 1000 parameters/s and a forward of 1200 s a block: apart,
  // only block 0's forward waits (the embedding's 6400 and its own 36992
  // parameters); a tail of every block starts after the embed stage's
  // forward (~0) and waits for every stage's: 6400 + 4 x 36992 + 6464.
  hw.gpu_tflops = 1e-9;
  hw.cpu_adam_gparams_per_s = 1e-6;
  m = make_cost_model(config, hw, {2, 8}, 0, 8);
  const PlanInstance slow = build_instance(m);
  EXPECT_NEAR(predict_step(m, slow, all_kept(4)).optimizer_s, 43.392, 1e-6);
  m.tail_blocks = 4;
  EXPECT_NEAR(predict_step(m, slow, all_kept(4)).optimizer_s, (6400 + 4 * 36992 + 6464) / 1000.0,
              1e-6);
}

// A tied head: the embedding matrix is the embed stage's, updated first
// (before any block), so block 0's forward waits for all of it: with
// slow compute, (100000 x 64 + 36992 block 0) / 1000 parameters/s.
TEST(CostModel, ATiedEmbeddingIsUpdatedWholeBeforeTheFirstBlock) {
  models::ModelConfig tied = testing::tiny_llama();
  tied.vocab_size = 100000;
  tied.tie_word_embeddings = true;
  HardwareProfile hw;
  hw.cpu_adam_gparams_per_s = 1e-6;
  hw.gpu_tflops = 1e-9;
  const CostModel m = make_cost_model(tied, hw, {2, 8}, 0, 4);
  const PlanInstance in = build_instance(m);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).optimizer_s, (100000.0 * 64 + 36992) / 1000, 1e-6);
}

// The optimizer's rate: the lesser of the CPU's measured rate for the
// optimizer in use and what host memory leaves it after the forward's
// copies; the bandwidth is host_mem_gbps or, if more, what the measured rate
// itself moves (bytes per parameter: 28 fp32 AdamW, 16 adamw8bit).
TEST(CostModel, OptimizerRateSharesHostBandwidthWithTheCopies) {
  // Slow compute (block forward 120.0128 s, head 20.48 s at 1e-8 TFLOP/s):
  // only block 0's forward waits, for the embedding's and its own update,
  // 6400 + 36992 = 43392 parameters. The forward copies two blocks' bf16
  // weights (2 x 36992 x 2 bytes) in 2 x 120.0128 + 20.48 s.
  HardwareProfile hw;
  hw.gpu_tflops = 1e-8;
  hw.host_mem_gbps = 1e-5;
  const double copy_gbps = 2 * 36992 * 2 / 1e9 / (2 * 120.0128 + 20.48);
  // fp32 at 1000 parameters/s moves 28000 B/s = 2.8e-5 GB/s, more than the
  // 1e-5 of host_mem_gbps: that is the bandwidth; the copies leave
  // 2.8e-5 - copy_gbps of it, which carries fewer than 1000 parameters/s.
  hw.cpu_adam_gparams_per_s = 1e-6;
  CostModel m = make_cost_model(testing::tiny_llama(), hw, {2, 8}, 0, 4);
  PlanInstance in = build_instance(m);
  const double fp32_rate = (2.8e-5 - copy_gbps) * 1e9 / 28;
  ASSERT_LT(fp32_rate, 1000);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).optimizer_s, 43392 / fp32_rate, 1e-9);
  // adamw8bit at 500 parameters/s moves 8e-6 GB/s, less than host_mem_gbps:
  // 1e-5 - copy_gbps carries more than 500 parameters/s, so the CPU bounds it.
  hw.cpu_adam8bit_gparams_per_s = 5e-7;
  m = make_cost_model(testing::tiny_llama(), hw, {2, 8, exec::OptimizerStates::EightBit}, 0, 4);
  in = build_instance(m);
  ASSERT_GT((1e-5 - copy_gbps) * 1e9 / 16, 500);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).optimizer_s, 43392 / 500.0, 1e-9);
}

// A rate measured beside the copies holds the contention of copies both
// ways at the bidirectional rate; a plan pays the share of it that its
// forward's copies make of that traffic, by hand here.
TEST(CostModel, ARateMeasuredBesideTheCopiesIsChargedByTheCopiesShare) {
  // As above: slow compute, block 0's forward waits for 43392 parameters.
  HardwareProfile hw;
  hw.gpu_tflops = 1e-8;
  hw.host_mem_gbps = 1e-5;           // would bound fp32 AdamW far below 700/s
  hw.cpu_adam_gparams_per_s = 1e-6;  // alone: 1000/s
  hw.cpu_adam_beside_copies_gparams_per_s = 7e-7;
  // The forward's copies: 2 blocks of 36992 bf16 weights over the forward
  // (2 blocks and the head, as above); the profile's copies ran at 2 x bidir.
  const double copy_gbps = 2 * 36992 * 2 / 1e9 / (2 * 120.0128 + 20.48);
  hw.bidir_gbps = copy_gbps;  // the plan's copies make half the profile's
  CostModel m = make_cost_model(testing::tiny_llama(), hw, {2, 8}, 0, 4);
  PlanInstance in = build_instance(m);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).optimizer_s, 43392 / 850.0, 1e-9);
  // The rate it priced with, as the plan line prints it.
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).cpu_update_params_per_s, 850.0, 1e-9);
  // Copies at or past the profile's: the measured rate, whole.
  hw.bidir_gbps = copy_gbps / 2;
  m = make_cost_model(testing::tiny_llama(), hw, {2, 8}, 0, 4);
  in = build_instance(m);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).optimizer_s, 43392 / 700.0, 1e-9);
  PlanSolution offloaded = all_kept(2);
  offloaded.placements[1] = exec::Placement::Host;
  EXPECT_NEAR(predict_step(m, in, offloaded).optimizer_s, 43392 / 700.0, 1e-9);
  // Copies a tenth of the profile's: a tenth of the cost.
  hw.bidir_gbps = 5 * copy_gbps;
  m = make_cost_model(testing::tiny_llama(), hw, {2, 8}, 0, 4);
  in = build_instance(m);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).optimizer_s, 43392 / 970.0, 1e-9);
  // Each optimizer reads its own key: adamw8bit has none here, so it falls
  // back to the shared-bandwidth estimate (the CPU bound, as above).
  hw.bidir_gbps = copy_gbps / 2;
  hw.cpu_adam8bit_gparams_per_s = 5e-7;
  m = make_cost_model(testing::tiny_llama(), hw, {2, 8, exec::OptimizerStates::EightBit}, 0, 4);
  in = build_instance(m);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).optimizer_s, 43392 / 500.0, 1e-9);
  hw.cpu_adam8bit_beside_copies_gparams_per_s = 4e-7;
  m = make_cost_model(testing::tiny_llama(), hw, {2, 8, exec::OptimizerStates::EightBit}, 0, 4);
  in = build_instance(m);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).optimizer_s, 43392 / 400.0, 1e-9);
  EXPECT_NEAR(predict_step(m, in, all_kept(2)).cpu_update_params_per_s, 400.0, 1e-9);
}

// A run's measured rate over the priced one (cpu_adam_in_run_scale) scales
// the rate whichever way it was priced, for its own optimizer only, and
// within [0.25, 2].
TEST(CostModel, TheInRunScaleMultipliesTheRateOfItsOptimizer) {
  HardwareProfile hw;  // as above: the CPU bounds the update at 1000/s
  hw.gpu_tflops = 1e-8;
  hw.cpu_adam_gparams_per_s = 1e-6;
  const auto optimizer_s = [&](exec::OptimizerStates states) {
    const CostModel m = make_cost_model(testing::tiny_llama(), hw, {2, 8, states}, 0, 4);
    return predict_step(m, build_instance(m), all_kept(2));
  };
  EXPECT_NEAR(optimizer_s(exec::OptimizerStates::Fp32).optimizer_s, 43392 / 1000.0, 1e-9);
  hw.cpu_adam_in_run_scale = 0.8;
  StepPrediction p = optimizer_s(exec::OptimizerStates::Fp32);
  EXPECT_NEAR(p.optimizer_s, 43392 / 800.0, 1e-9);
  EXPECT_NEAR(p.cpu_update_params_per_s, 800.0, 1e-9);
  EXPECT_EQ(p.cpu_update_in_run_scale, 0.8);
  hw.cpu_adam8bit_gparams_per_s = 5e-7;  // adamw8bit reads its own key: none
  EXPECT_NEAR(optimizer_s(exec::OptimizerStates::EightBit).optimizer_s, 43392 / 500.0, 1e-9);
  // Beside-the-copies pricing scales the same way (its rate: 850/s above).
  hw.cpu_adam_beside_copies_gparams_per_s = 7e-7;
  hw.bidir_gbps = 2 * 36992 * 2 / 1e9 / (2 * 120.0128 + 20.48);
  EXPECT_NEAR(optimizer_s(exec::OptimizerStates::Fp32).cpu_update_params_per_s, 0.8 * 850.0, 1e-9);
  hw.cpu_adam_in_run_scale = 10;  // not a machine's figure: held to 2
  EXPECT_NEAR(optimizer_s(exec::OptimizerStates::Fp32).cpu_update_params_per_s, 2 * 850.0, 1e-9);
}

TEST(CostModel, WindowsCarryTheirCapacityAndWeightPrefetch) {
  HardwareProfile hw;
  hw.gpu_tflops = 1e-6;
  hw.bidir_gbps = 10;
  hw.disk_read_gbps = 2;
  const CostModel m = make_cost_model(testing::tiny_llama(), hw, {2, 8}, 0, 4);
  const PlanInstance in = build_instance(m);
  ASSERT_EQ(in.num_blocks, 2);
  // Forward window 0: one block forward at 10 GB/s out.
  EXPECT_NEAR(in.link(Link::DeviceToHost).capacity_gb[0], 10 * 1.200128, 1e-12);
  // Backward window 1: re-forward + backward (3 forwards less the unread
  // down_proj's 0.262144 s) at 2 GB/s of disk reads; the head step (window
  // 2) is 3 head forwards.
  EXPECT_NEAR(in.link(Link::DiskRead).capacity_gb[1], 2 * (3 * 1.200128 - 0.262144), 1e-12);
  EXPECT_NEAR(in.link(Link::DiskRead).capacity_gb[2], 2 * 3 * 0.2048, 1e-12);
  // Backward windows 1 and 2 prefetch a block's bf16 weights; window 0 none.
  EXPECT_EQ(in.link(Link::HostToDevice).mandatory_gb[0], 0);
  EXPECT_NEAR(in.link(Link::HostToDevice).mandatory_gb[1], 36992 * 2 / 1e9, 1e-18);
  EXPECT_NEAR(in.link(Link::HostToDevice).mandatory_gb[2], 36992 * 2 / 1e9, 1e-18);
  EXPECT_NEAR(in.boundary_gb[1], 2048 / 1e9, 1e-18);
}

}  // namespace
}  // namespace lt::plan
