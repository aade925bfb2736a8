// Data parallel for the streaming executor (exec/streaming_ranks.cpp), end
// to end on the CPU: `lazytrain launch --nproc N train` against one
// process at the same global batch (the outside reference: the streaming
// executor's own tests check it against the resident one, and that against
// PyTorch). Losses and gradient norms within 1e-6, weights within 2e-6:
// plain, with accumulation and recomputation (every_k), on 3 ranks; a
// resume across world sizes continues as an uninterrupted run. The same
// with ZeRO-1 (dist.zero 1: each stage's gradients reduce-scattered, its
// shard updated, the masters all-gathered), whose checkpoints re-shard on
// resume, and whose host peak per rank falls as the allocator counts.
#include <gtest/gtest.h>

#include "dist/dist_runs.h"

namespace lt::train::testing {
namespace {

struct Shape {
  const char* name;
  int nproc;
  std::vector<std::string> sets;
};

class StreamingRanks : public ::testing::TestWithParam<Shape> {};

TEST_P(StreamingRanks, GiveOneProcessLossesNormsAndWeights) {
  Runs runs;
  std::vector<std::string> sets = GetParam().sets;
  sets.insert(sets.end(), {"exec.mode=streaming", "train.steps=4"});
  runs.train(0, runs.tmp / "one", sets);
  runs.train(GetParam().nproc, runs.tmp / "many", sets);
  expect_same_steps(runs.tmp / "one", runs.tmp / "many");
  expect_same_weights(runs.tmp / "one" / "step-4", runs.tmp / "many" / "step-4");
}

INSTANTIATE_TEST_SUITE_P(
    Runs, StreamingRanks,
    ::testing::Values(
        Shape{"two", 2, {"train.batch_size=4"}},
        Shape{"accumulated_recomputed",
              2,
              {"train.batch_size=4", "train.grad_accum=2", "exec.schedule=every_k",
               "exec.keep_every=2"}},
        Shape{"three", 3, {"train.batch_size=6", "data.pack=true"}},
        Shape{"zero1", 2, {"train.batch_size=4", "dist.zero=1"}},
        Shape{"zero1_private_weights",
              2,
              {"train.batch_size=4", "dist.zero=1", "dist.share_weights=false"}},
        Shape{"zero1_accumulated_recomputed",
              2,
              {"train.batch_size=4", "train.grad_accum=2", "exec.schedule=every_k",
               "exec.keep_every=2", "dist.zero=1"}},
        Shape{"zero1_three_ranks", 3, {"train.batch_size=6", "data.pack=true", "dist.zero=1"}},
        Shape{"zero1_private_weights_three_ranks",
              3,
              {"train.batch_size=6", "data.pack=true", "dist.zero=1", "dist.share_weights=false"}}),
    [](const auto& info) { return std::string(info.param.name); });

// The planner's schedule: one process fuses the tail and keeps stages on
// the device; several plan without them (for one process so far), rather
// than turning them off after planning, and give the same steps.
TEST(StreamingRanks, PlanWithoutTheFusedTailOrStagesOnTheDevice) {
  Runs runs;
  const std::vector<std::string> sets = {"exec.mode=streaming", "exec.schedule=auto",
                                         "train.batch_size=4", "train.steps=4"};
  std::string one, many;
  runs.train(0, runs.tmp / "one", sets, &one);
  runs.train(2, runs.tmp / "many", sets, &many);
  EXPECT_NE(one.find("blocks fused with the head: the last"), std::string::npos) << one;
  EXPECT_NE(many.find("stages kept and updated on the device: none; blocks fused with the head: "
                      "none"),
            std::string::npos)
      << many;
  EXPECT_EQ(many.find("after all"), std::string::npos) << many;
  expect_same_steps(runs.tmp / "one", runs.tmp / "many");
  expect_same_weights(runs.tmp / "one" / "step-4", runs.tmp / "many" / "step-4");
}

TEST(StreamingRanks, ResumeOnAnotherWorldSizeContinuesAsUninterrupted) {
  Runs runs;
  auto with_steps = [](int steps) {
    return std::vector<std::string>{"exec.mode=streaming", "train.batch_size=4",
                                    "train.steps=" + std::to_string(steps)};
  };
  runs.train(0, runs.tmp / "whole", with_steps(4));
  const fs::path out = runs.tmp / "from2to0";
  runs.train(2, out, with_steps(2));
  runs.train(0, out, with_steps(4), nullptr, "latest");
  expect_same_steps(runs.tmp / "whole", out);
  expect_same_weights(runs.tmp / "whole" / "step-4", out / "step-4");
}

// ZeRO-1 checkpoints (one optimizer shard per rank) resumed on another
// world size, and by one process without ZeRO: as uninterrupted.
TEST(StreamingRanks, ZeroCheckpointsResumeOnOtherWorldSizes) {
  Runs runs;
  auto with_steps = [](int steps) {
    return std::vector<std::string>{"exec.mode=streaming", "train.batch_size=6", "dist.zero=1",
                                    "train.steps=" + std::to_string(steps)};
  };
  runs.train(0, runs.tmp / "whole", with_steps(4));
  for (const auto& [first, then] : {std::pair{2, 0}, std::pair{0, 2}, std::pair{2, 3}}) {
    const fs::path out = runs.tmp / ("from" + std::to_string(first) + "to" + std::to_string(then));
    runs.train(first, out, with_steps(2));
    if (first > 1) {
      EXPECT_TRUE(fs::is_regular_file(out / "step-2" / "optimizer-shard-1-of-2.safetensors"));
    }
    runs.train(then, out, with_steps(4), nullptr, "latest");
    expect_same_steps(runs.tmp / "whole", out);
    expect_same_weights(runs.tmp / "whole" / "step-4", out / "step-4");
  }
}

// adamw8bit (blocks of 64 from tensors of 1000 elements: the projections
// and embedding are quantized and cut): ZeRO-1 on 2 ranks against the
// all-reduce on 2 ranks (offload_ranks_test says why not one process).
TEST(StreamingRanks, ZeroAdamW8bitGivesTheAllReduceRun) {
  Runs runs;
  std::vector<std::string> sets = {"exec.mode=streaming", "train.batch_size=4",
                                   "train.steps=4",       "optim.name=adamw8bit",
                                   "optim.block_size=64", "optim.min_8bit_numel=1000"};
  runs.train(2, runs.tmp / "all_reduce", sets);
  sets.push_back("dist.zero=1");
  runs.train(2, runs.tmp / "zero", sets);
  expect_same_steps(runs.tmp / "all_reduce", runs.tmp / "zero");
  expect_same_weights(runs.tmp / "all_reduce" / "step-4", runs.tmp / "zero" / "step-4");
}

// Host memory per rank (dist_runs.h): ZeRO-1 on 2 ranks keeps 2 bytes a
// parameter less, from step 2 (the first step still frees the executor's
// own gradient slabs).
TEST(StreamingRanks, ZeroLowersTheHostPeakPerRank) {
  expect_zero_saves_two_bytes_a_parameter("streaming", 1);
}

}  // namespace
}  // namespace lt::train::testing
