// Data parallel for the offload executor, with and without ZeRO-1
// (dist.zero 1; exec/offload_ranks.cpp, exec/zero_optimizer.h), end to
// end on the CPU: `lazytrain launch --nproc N train` against one process
// at the same global batch (the outside reference: the offload executor's
// own tests check it against the resident one, and that against PyTorch).
// Losses and gradient norms within 1e-6, weights within 2e-6; with ZeRO-1
// on 3 ranks the fixture's parameters do not divide into the shards, so
// tensors are cut between ranks. Checkpoints of a ZeRO-1 run hold the
// whole optimizer state: resumes across world sizes, with and without
// ZeRO, continue as an uninterrupted one-process run.
#include <gtest/gtest.h>

#include "dist/dist_runs.h"
#include "io/safetensors.h"

namespace lt::train::testing {
namespace {

struct Shape {
  const char* name;
  int nproc;
  std::vector<std::string> sets;
};

class OffloadRanks : public ::testing::TestWithParam<Shape> {};

TEST_P(OffloadRanks, GiveOneProcessLossesNormsAndWeights) {
  Runs runs;
  std::vector<std::string> sets = GetParam().sets;
  sets.insert(sets.end(), {"exec.mode=offload", "train.steps=4"});
  runs.train(0, runs.tmp / "one", sets);
  std::string output;
  runs.train(GetParam().nproc, runs.tmp / "many", sets, &output);
  expect_same_steps(runs.tmp / "one", runs.tmp / "many");
  expect_same_weights(runs.tmp / "one" / "step-4", runs.tmp / "many" / "step-4");
}

INSTANTIATE_TEST_SUITE_P(
    Runs, OffloadRanks,
    ::testing::Values(Shape{"all_reduce", 2, {"train.batch_size=4", "train.grad_accum=2"}},
                      Shape{"zero1", 2, {"train.batch_size=4", "dist.zero=1"}},
                      Shape{"zero1_three_ranks", 3, {"train.batch_size=6", "dist.zero=1"}}),
    [](const auto& info) { return std::string(info.param.name); });

// Stopped at step 2 and resumed to 4 on another world size, with ZeRO-1
// on the ranks: a ZeRO-1 checkpoint holds one optimizer file per rank
// (exec/zero_checkpoint.h), and a resume on another world size, or one
// process without ZeRO, re-shards them: as uninterrupted.
TEST(OffloadRanks, ZeroCheckpointsResumeOnOtherWorldSizes) {
  Runs runs;
  const std::vector<std::string> common = {"exec.mode=offload", "train.batch_size=6",
                                           "dist.zero=1"};
  auto with_steps = [&](int steps) {
    std::vector<std::string> s = common;
    s.push_back("train.steps=" + std::to_string(steps));
    return s;
  };
  runs.train(0, runs.tmp / "whole", with_steps(4));
  for (const auto& [first, then] :
       {std::pair{2, 0}, std::pair{0, 2}, std::pair{2, 3}, std::pair{3, 2}}) {
    const fs::path out = runs.tmp / ("from" + std::to_string(first) + "to" + std::to_string(then));
    runs.train(first, out, with_steps(2));
    if (first > 1) {
      const auto head = io::read_safetensors(out / "step-2" / "optimizer.safetensors");
      ASSERT_TRUE(head.count("zero.world_size")) << out;
      EXPECT_EQ(*head.at("zero.world_size").data<int64_t>(), first);
      for (int r = 0; r < first; ++r)
        EXPECT_TRUE(fs::is_regular_file(out / "step-2" /
                                        ("optimizer-shard-" + std::to_string(r) + "-of-" +
                                         std::to_string(first) + ".safetensors")))
            << out << " rank " << r;
      EXPECT_FALSE(fs::exists(out / ".step-2.shards")) << "the shards' folder is left";
    }
    runs.train(then, out, with_steps(4), nullptr, "latest");
    expect_same_steps(runs.tmp / "whole", out);
    expect_same_weights(runs.tmp / "whole" / "step-4", out / "step-4");
  }
}

// Host memory per rank, measured by the allocator (metrics.jsonl's host
// peak): with ZeRO-1 on 2 ranks a rank holds half the AdamW states (8 P / 2
// bytes less) and the shard's summed gradients (4 P / 2 more), the slabs
// being views of the flat buffer: 2 P bytes less in all, P the parameters.
TEST(OffloadRanks, ZeroLowersTheHostPeakPerRank) {
  Runs runs;
  const std::vector<std::string> sets = {"exec.mode=offload", "train.batch_size=4",
                                         "train.steps=2"};
  std::vector<std::string> zero = sets;
  zero.push_back("dist.zero=1");
  runs.train(2, runs.tmp / "plain", sets);
  runs.train(2, runs.tmp / "zero", zero);
  auto peak = [](const fs::path& out) {
    int64_t most = 0;
    for (const auto& line : read_metrics(out))
      most = std::max(most, line.at("peak_bytes").at("host").get<int64_t>());
    return most;
  };
  int64_t params = 0;
  for (const auto& [name, p] : io::load_hf_model(fixture("qwen3")).parameters())
    params += p.numel();
  const int64_t saved = peak(runs.tmp / "plain") - peak(runs.tmp / "zero");
  EXPECT_GT(saved, 3 * params / 2) << "of " << 2 * params << " bytes expected";
  EXPECT_LT(saved, 5 * params / 2) << "of " << 2 * params << " bytes expected";
}

TEST(OffloadRanks, ZeroNeedsTheOffloadExecutorNamingTheKey) {
  Runs runs;
  std::string output;
  EXPECT_NE(run_program(runs.args(2, runs.tmp / "bad",
                                  {"exec.mode=resident", "dist.zero=1", "train.batch_size=4"}),
                        runs.tmp / "bad.log", &output, 60),
            0);
  EXPECT_NE(output.find("config key 'dist.zero' 1 (ZeRO-1) needs exec.mode offload"),
            std::string::npos)
      << output;
}

}  // namespace
}  // namespace lt::train::testing
