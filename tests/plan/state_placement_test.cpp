// plan/state_placement.h: the order `auto` moves stages to disk, the
// update pipeline with states on disk against timelines worked out by
// hand, and the cost model's step prediction with every stage's states on
// disk against the same hand count at its own rates.
#include <gtest/gtest.h>

#include "plan/cost_model.h"
#include "plan/state_placement.h"
#include "plan/tiny_model.h"

namespace lt::plan {
namespace {

TEST(StatePlacement, DiskOrderIsTheBlocksFromTheLastThenTheHeadThenTheEmbedding) {
  // tiny_llama: 2 blocks (stages 1, 2), head 3, embed 0.
  EXPECT_EQ(disk_order(testing::tiny_llama()), (std::vector<int>{2, 1, 3, 0}));
}

// No stage on disk: the next forward of stage k waits for the updates of
// stages 0..k, which run back to back: exposed = max_k (sum of updates
// through k - sum of forwards before k). Updates 3, 1, 1; forwards 1, 1, 1:
// max(3 - 0, 4 - 1, 5 - 2) = 3.
TEST(StatePlacement, WithoutDiskTheExposureIsTheUpdatesAheadOfTheForward) {
  const std::vector<StageUpdate> stages = {
      {3, 1, 0, 0, false}, {1, 1, 0, 0, false}, {1, 1, 0, 0, false}};
  const UpdatePipeline p = predict_update_pipeline(stages);
  EXPECT_DOUBLE_EQ(p.exposed_s, 3);
  EXPECT_EQ(p.disk_busy_s, 0);
}

// Three stages on disk, each: read 1 s, update 1 s, write 1 s, forward 1 s,
// backward 0. The state thread runs R0 R1 W0 R2 W1 W2 (two reads ahead);
// R0 and R1 are queued at the step's start, behind the previous step's
// write-backs. Without that lead (the first round of the steady state):
//   R0 [0,1] R1 [1,2]; U0 [1,2]; W0 [2,3]; R2 [3,4]; U1 [2,3]; W1 [4,5];
//   U2 [4,5]; W2 [5,6]; ready 3, 5, 6; forwards [3,4] [5,6] [6,7].
// The next step starts at 0 and its updates at 7 (its forward's end, no
// backward), and its reads follow W2 at 6: a lead of 1 s. With it:
//   R0 [-1,0] R1 [0,1]; U0 [0,1]; W0 [1,2]; R2 [2,3]; U1 [1,2]; W1 [3,4];
//   U2 [3,4]; W2 [4,5]; ready 2, 4, 5; forwards [2,3] [4,5] [5,6]:
// 6 s for 3 s of forward, 3 s exposed, and the next lead is 6 - 5 = 1
// again; the disk works 6 s.
TEST(StatePlacement, EveryStageOnDiskByHand) {
  const std::vector<StageUpdate> stages(3, StageUpdate{1, 1, 1, 1, true});
  const UpdatePipeline p = predict_update_pipeline(stages, /*reads_at_step_start=*/true);
  EXPECT_DOUBLE_EQ(p.exposed_s, 3);
  EXPECT_DOUBLE_EQ(p.disk_busy_s, 6);
  // The offload executor reads only with the updates: the first round's.
  EXPECT_DOUBLE_EQ(predict_update_pipeline(stages).exposed_s, 4);
}

// Host stage 0 (update 2), disk stages 1 and 2 (read 0.5, update 1, write
// 0.5), forwards 2 each. R1 [0,0.5] R2 [0.5,1]; U0 [0,2]; U1 [2,3]; W1
// [3,3.5]; U2 [3,4]; W2 [4,4.5]. Ready 2, 3.5, 4.5; forwards [2,4], [4,6],
// [6,8]: 2 s exposed, all of it the host stage's update (the disk hides).
// The reads' lead in the steady state (8 - 4.5) changes nothing here.
TEST(StatePlacement, ReadsHideBehindTheHostStagesUpdates) {
  const std::vector<StageUpdate> stages = {
      {2, 2, 0, 0, false}, {1, 2, 0.5, 0.5, true}, {1, 2, 0.5, 0.5, true}};
  const UpdatePipeline p = predict_update_pipeline(stages, /*reads_at_step_start=*/true);
  EXPECT_DOUBLE_EQ(p.exposed_s, 2);
  EXPECT_DOUBLE_EQ(p.disk_busy_s, 2);
}

// The cost model with every stage of the tiny Llama on disk, at rates that
// make the arithmetic plain: 1 G parameters/s of AdamW (no copies beside
// it: host_mem_gbps large) and 1e-6 GB/s of disk. Stage parameters: embed
// 6400, blocks 36992, head 6464; bytes on disk 12 a parameter (fp32 AdamW).
TEST(StatePlacement, TheCostModelAddsTheDiskToTheOptimizer) {
  HardwareProfile hw;
  hw.gpu_tflops = 1e-6;  // a block's forward: 1.200128 s (cost_model_test)
  hw.cpu_adam_gparams_per_s = 1;
  hw.host_mem_gbps = 1e9;
  hw.disk_read_gbps = hw.disk_write_gbps = 1e-6;  // 1000 bytes a second
  exec::TrainSizes sizes{2, 8};
  const models::ModelConfig c = testing::tiny_llama();
  const CostModel host = make_cost_model(c, hw, sizes, 0, 4);
  sizes.states_on_disk.assign(4, true);
  const CostModel disk = make_cost_model(c, hw, sizes, 0, 4);
  PlanSolution kept;
  kept.feasible = true;
  kept.placements.assign(3, exec::Placement::Gpu);
  const StepPrediction h = predict_step(host, build_instance(host), kept);
  const StepPrediction d = predict_step(disk, build_instance(disk), kept);
  // The same pipeline by hand: updates n / 1e9 s, reads and writes 12 n /
  // 1000 s, forwards 0 (embed), 1.200128 (blocks), 0.2048 (head).
  const std::vector<double> params = {6400, 36992, 36992, 6464};
  const std::vector<double> forward = {0, 1.200128, 1.200128, 0.2048};
  const std::vector<double> backward = {disk.embed_s, disk.block_backward_s, disk.block_backward_s,
                                        disk.head_step_s};
  std::vector<StageUpdate> stages;
  for (size_t s = 0; s < 4; ++s)
    stages.push_back({params[s] / 1e9, forward[s], 12 * params[s] / 1000, 12 * params[s] / 1000,
                      true, backward[s]});
  const UpdatePipeline want = predict_update_pipeline(stages, /*reads_at_step_start=*/true);
  // From 0 with no lead: R0 [0, 76.8], R1 [76.8, 520.704], W0 [..,
  // 597.504], R2 [.., 1041.408], W1 [.., 1485.312], R3 [.., 1562.88], W2
  // [.., 2006.784], W3 [.., 2084.352]; the head's forward waits for W3. The
  // disk bounds the whole chain, so the next step's reads, behind W3, lead
  // its updates by the head's forward and the step's backwards, and the
  // steady state is that chain moved up by them.
  const double lead = 0.2048 + disk.embed_s + 2 * disk.block_backward_s + disk.head_step_s;
  EXPECT_NEAR(want.exposed_s, 2084.352 - 2.400256 - lead, 1e-6);
  EXPECT_NEAR(d.optimizer_s, want.exposed_s, 1e-9);
  EXPECT_NEAR(d.state_disk_busy_s, 2 * 12 * (6400 + 2 * 36992 + 6464) / 1000.0, 1e-9);
  EXPECT_NEAR(d.exposed_state_disk_s, d.optimizer_s - h.optimizer_s, 1e-9);
  EXPECT_NEAR(d.step_s - h.step_s, d.optimizer_s - h.optimizer_s, 1e-9);
  EXPECT_EQ(h.state_disk_busy_s, 0);
}

// train.clip_with_previous_norm: updates queued as each stage's backward
// ends (backward order: head, block, embed). Stages embed, block, head:
// backwards 0, 2, 1; updates 0.5 each; forwards 0, 1, 1. Gradients land at
// 1 (head), 3 (block), 3 (embed). U(head) [1, 1.5], U(block) [3, 3.5],
// U(embed) [3.5, 4]. The next forward starts at 3: embed waits to 4 (ends
// 4), block [4, 5], head [5, 6]: 6 - (3 + 2) = 1 s exposed, the embed's
// update alone. After the backward (predict_update_pipeline) all three
// would run then: embed [0, 0.5], block ready 1, head 1.5; forwards end at
// 0.5, 2, 3: also 1 s exposed (the embed's 0.5 and the block's).
TEST(StatePlacement, UpdatesDuringTheBackwardByHand) {
  std::vector<StageUpdate> stages = {
      {0.5, 0, 0, 0, false, 0}, {0.5, 1, 0, 0, false, 2}, {0.5, 1, 0, 0, false, 1}};
  EXPECT_DOUBLE_EQ(predict_update_pipeline_during_backward(stages).exposed_s, 1);
  // Longer updates: 2 s each. After the backward: U [0,2] [2,4] [4,6];
  // forwards end 2, 5, 7: 5 s exposed. During it: U(head) [1,3], U(block)
  // [3,5], U(embed) [5,7]; the forward from 7: 9 - 5 = 4 s exposed.
  for (StageUpdate& st : stages) st.update_s = 2;
  EXPECT_DOUBLE_EQ(predict_update_pipeline(stages).exposed_s, 5);
  EXPECT_DOUBLE_EQ(predict_update_pipeline_during_backward(stages).exposed_s, 4);
}

// Four stages, the last three on disk (read 1, write 1, update 0.5),
// backwards 0 (embed), 1, 1, 1 (head), forwards 0, 1, 1, 1. Land: head 1,
// block 1 at 2, block 0 at 3, embed 3. The states thread: R(3) R(2) R(1)
// queued at the step's start, L s before the backward, then W(3) W(2) W(1)
// each behind its update (Note [Updates during the backward]; three reads
// ahead, so none behind a write-back here). The updates: U(3) [1,1.5],
// U(2) [2,2.5], U(1) [3,3.5], U(0) [3.5,4] (host). With L = 2, the steady
// state: R(3) [-2,-1] R(2) [-1,0] R(1) [0,1]; W(3) [1.5,2.5], W(2)
// [2.5,3.5], W(1) [3.5,4.5]. The forward from 3: embed waits to 4, block 0
// for W(1): [4.5,5.5], block 1 [5.5,6.5], head [6.5,7.5]: 7.5 - (3 + 3) =
// 1.5 s exposed. The next step starts at 3, its reads follow W(1) at 4.5,
// its head step at 6.5: a lead of 2 again. The disk works 6 s.
TEST(StatePlacement, DiskStagesDuringTheBackwardByHand) {
  const std::vector<StageUpdate> stages = {{0.5, 0, 0, 0, false, 0},
                                           {0.5, 1, 1, 1, true, 1},
                                           {0.5, 1, 1, 1, true, 1},
                                           {0.5, 1, 1, 1, true, 1}};
  const UpdatePipeline p = predict_update_pipeline_during_backward(stages);
  EXPECT_DOUBLE_EQ(p.exposed_s, 1.5);
  EXPECT_DOUBLE_EQ(p.disk_busy_s, 6);
  // A disk slower than the step: at least its work beyond the compute.
  std::vector<StageUpdate> slow = stages;
  for (StageUpdate& st : slow) st.read_s = st.write_s = st.on_disk ? 5 : 0;
  EXPECT_GE(predict_update_pipeline_during_backward(slow).exposed_s, 30 - 6);
}

// Five stages, the last four on disk (read 1, write 1, update 0.5),
// backwards 0 (embed), 1, 1, 1, 1 (head), forwards the same. Land: head 1,
// blocks 2, 3, 4 (block 0), embed 4. The fourth read waits behind the
// first write-back: R(4) R(3) R(2) W(4) R(1) W(3) W(2) W(1). With the
// steady lead L = 3: R(4) [-3,-2] R(3) [-2,-1] R(2) [-1,0]; U(4) [1,1.5],
// W(4) [1.5,2.5], R(1) [2.5,3.5]; U(3) [2,2.5], W(3) [3.5,4.5]; U(2)
// [3,3.5], W(2) [4.5,5.5]; U(1) [4,4.5], W(1) [5.5,6.5]; U(0) [4.5,5]. The
// forward from 4: embed waits to 5, block 0 for W(1) [6.5,7.5], then
// [7.5,8.5], [8.5,9.5], the head [9.5,10.5]: 10.5 - (4 + 4) = 2.5 s
// exposed. The next step starts at 4 and its reads follow W(1) at 6.5,
// its head step at 9.5: the lead is 3 again. (With no lead, the first
// round, W(1) ends at 8 and 4 s are exposed.) The disk works 8 s.
TEST(StatePlacement, AReadBehindAWriteBackDuringTheBackwardByHand) {
  const std::vector<StageUpdate> stages = {{0.5, 0, 0, 0, false, 0},
                                           {0.5, 1, 1, 1, true, 1},
                                           {0.5, 1, 1, 1, true, 1},
                                           {0.5, 1, 1, 1, true, 1},
                                           {0.5, 1, 1, 1, true, 1}};
  const UpdatePipeline p = predict_update_pipeline_during_backward(stages);
  EXPECT_DOUBLE_EQ(p.exposed_s, 2.5);
  EXPECT_DOUBLE_EQ(p.disk_busy_s, 8);
}

// The cost model with the option: the prediction uses the pipeline during
// the backward, and for these sizes (updates as long as the blocks'
// backward) exposes less of the optimizer than after the backward.
TEST(StatePlacement, TheCostModelPricesUpdatesDuringTheBackward) {
  HardwareProfile hw;
  hw.gpu_tflops = 1e-6;
  hw.cpu_adam_gparams_per_s = 1e-5;  // a block's update ~3.7 s
  hw.host_mem_gbps = 1e9;
  exec::TrainSizes sizes{2, 8};
  const models::ModelConfig c = testing::tiny_llama();
  CostModel after = make_cost_model(c, hw, sizes, 0, 4);
  CostModel during = after;
  during.updates_during_backward = true;
  PlanSolution kept;
  kept.feasible = true;
  kept.placements.assign(3, exec::Placement::Gpu);
  const StepPrediction a = predict_step(after, build_instance(after), kept);
  const StepPrediction d = predict_step(during, build_instance(during), kept);
  EXPECT_GT(a.optimizer_s, 0);
  EXPECT_LT(d.optimizer_s, a.optimizer_s);
  EXPECT_NEAR(a.step_s - d.step_s, a.optimizer_s - d.optimizer_s, 1e-9);
}

TEST(StatePlacement, TrafficIsEachDiskStageReadAndWrittenOnce) {
  exec::TrainSizes sizes{2, 8};
  sizes.optimizer = exec::OptimizerStates::EightBit;
  sizes.optimizer_block = 64;
  sizes.states_on_disk = {false, true, false, true};
  // Block 0: 36992 parameters, f32 master 4 + codes 2 + scales 2 x 4 x
  // ceil(36992 / 64) = 578 blocks; head 6464: 101 blocks.
  const StateTraffic t = state_traffic(testing::tiny_llama(), sizes);
  const int64_t want = 36992 * 6 + 2 * 4 * 578 + 6464 * 6 + 2 * 4 * 101;
  EXPECT_EQ(t.read_bytes, want);
  EXPECT_EQ(t.write_bytes, want);
}

}  // namespace
}  // namespace lt::plan
