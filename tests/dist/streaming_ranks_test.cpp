// Data parallel for the streaming executor (exec/streaming_ranks.cpp), end
// to end on the CPU: `lazytrain launch --nproc N train` against one
// process at the same global batch (the outside reference: the streaming
// executor's own tests check it against the resident one, and that against
// PyTorch). Losses and gradient norms within 1e-6, weights within 2e-6:
// plain, with accumulation and recomputation (every_k), on 3 ranks; a
// resume across world sizes continues as an uninterrupted run.
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
    ::testing::Values(Shape{"two", 2, {"train.batch_size=4"}},
                      Shape{"accumulated_recomputed",
                            2,
                            {"train.batch_size=4", "train.grad_accum=2", "exec.schedule=every_k",
                             "exec.keep_every=2"}},
                      Shape{"three", 3, {"train.batch_size=6", "data.pack=true"}}),
    [](const auto& info) { return std::string(info.param.name); });

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

}  // namespace
}  // namespace lt::train::testing
