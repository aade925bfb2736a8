// exec::bytes_needed against counts worked out by hand for a tiny Llama.
#include <gtest/gtest.h>

#include "exec/memory_budget.h"
#include "models/config.h"
#include "plan/tiny_model.h"

namespace lt::exec {
namespace {

models::ModelConfig tiny() {
  return testing::tiny_llama();
}

// By hand:
//   block: q 64*64 + k, v 2*64*32 + o 64*64 + gate, up, down 3*64*128 + 2 norms 2*64
//        = 4096 + 4096 + 4096 + 24576 + 128 = 36992
//   edge: embedding 100*64 + lm_head 100*64 + final norm 64 = 12864
//   N = 2 * 36992 + 12864 = 86848
constexpr int64_t kBlock = 36992, kEdge = 12864, kN = 86848;
// B = 2, T = 8: a boundary is 2 * 8 * 64 * 2 = 2048 bytes.
constexpr int64_t kBoundary = 2048;
// GPU, micro-batch 1 (8 tokens):
//   weights and gradients, double buffers: 2 * 2 * kBlock * 2 B = 295936
//   embedding/head/norm weights + gradients: 2 * kEdge * 2 B  = 51456
//   working set: 2 * (4*64 + 2*64 + 2*32 + 4*128 = 960) * 8 tokens * 2 B = 30720
//   loss: 2 * 8 tokens * 100 * 4 B = 6400
constexpr int64_t kGpuFixed = 295936 + 51456 + 30720 + 6400;
// Host: master 4 + m, v 8 + pinned bf16 weights 2 + pinned bf16 grads 2 = 16 B/param.
constexpr int64_t kHostFixed = 16 * kN;

Schedule schedule(std::vector<Placement> b) {
  Schedule s;
  s.batch_size = 2;
  s.micro_batch = 1;
  s.boundaries = std::move(b);
  return s;
}

TEST(MemoryBudget, ParameterSplit) {
  EXPECT_EQ(block_parameters(tiny()), kBlock);
  EXPECT_EQ(edge_parameters(tiny()), kEdge);
  EXPECT_EQ(tiny().num_parameters(), kN);
  EXPECT_EQ(boundary_bytes(tiny(), {2, 8}), kBoundary);
}

TEST(MemoryBudget, AllOnGpu) {
  const auto m =
      bytes_needed(tiny(), {2, 8}, schedule({Placement::Gpu, Placement::Gpu, Placement::Gpu}));
  EXPECT_EQ(m.bytes(MemorySpace::Gpu), kGpuFixed + 3 * kBoundary);
  EXPECT_EQ(m.bytes(MemorySpace::Host), kHostFixed);
  EXPECT_EQ(m.bytes(MemorySpace::Disk), 0);
}

TEST(MemoryBudget, RecomputeNeedsItsBuffer) {
  const auto m = bytes_needed(tiny(), {2, 8},
                              schedule({Placement::Gpu, Placement::Recompute, Placement::Gpu}));
  // Two kept + one rematerialized boundary.
  EXPECT_EQ(m.bytes(MemorySpace::Gpu), kGpuFixed + 2 * kBoundary + kBoundary);
  EXPECT_EQ(m.bytes(MemorySpace::Host), kHostFixed);
}

TEST(MemoryBudget, HostAndDiskPlacements) {
  const auto host =
      bytes_needed(tiny(), {2, 8}, schedule({Placement::Gpu, Placement::Host, Placement::Gpu}));
  // Two kept on the GPU + one staging; the boundary itself on the host.
  EXPECT_EQ(host.bytes(MemorySpace::Gpu), kGpuFixed + 2 * kBoundary + kBoundary);
  EXPECT_EQ(host.bytes(MemorySpace::Host), kHostFixed + kBoundary);
  const auto disk =
      bytes_needed(tiny(), {2, 8}, schedule({Placement::Gpu, Placement::Disk, Placement::Gpu}));
  EXPECT_EQ(disk.bytes(MemorySpace::Host), kHostFixed + kBoundary);  // pinned staging
  EXPECT_EQ(disk.bytes(MemorySpace::Disk), 4096);  // 2048 padded to O_DIRECT's 4 KiB
}

TEST(MemoryBudget, EightBitStatesAndWholeBatchChunks) {
  TrainSizes sizes{2, 8, OptimizerStates::EightBit};
  Schedule s = schedule({Placement::Gpu, Placement::Gpu, Placement::Gpu});
  s.micro_batch = 0;  // the whole batch: 16 tokens
  const auto m = bytes_needed(tiny(), sizes, s);
  // m, v: 1 B each per parameter + an fp32 scale per 2048 for each:
  // ceil(86848 / 2048) = 43 blocks -> 2 * 86848 + 2 * 43 * 4 = 174040.
  EXPECT_EQ(m.bytes(MemorySpace::Host), (4 + 2 + 2) * kN + 174040);
  EXPECT_EQ(m.bytes(MemorySpace::Gpu),
            295936 + 51456 + 2 * 960 * 16 * 2 + 2 * 16 * 100 * 4 + 3 * kBoundary);
}

TEST(MemoryBudget, LongestRecomputeRun) {
  using P = Placement;
  EXPECT_EQ(longest_recompute_run(
                schedule({P::Gpu, P::Recompute, P::Recompute, P::Host, P::Recompute, P::Gpu})),
            2);
}

}  // namespace
}  // namespace lt::exec
