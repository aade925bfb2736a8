// Optimizer states made without memory for the stages on disk (AdamW's and
// AdamW8bit's states_without_memory; Note [Stage states on disk], "the
// start"): the streaming executor makes each disk stage's first states a
// stage at a time as it writes them out, and the run is the host-placed
// run bit for bit (losses, weights and every state after sync()), for
// adamw and adamw8bit, every stage on disk or some. Building the optimizer
// and the executor then holds less extra host memory than the states of
// every stage together, which making them all first (as the start did
// before) holds by itself. A state without memory in a stage that stays in
// host memory is an error naming it.
#include <gtest/gtest.h>

#include "core/allocator.h"
#include "core/random.h"
#include "exec/staged_states.h"
#include "exec/streaming.h"
#include "support/errors.h"
#include "support/fixture_models.h"
#include "support/random_batch.h"
#include "train/train_helpers.h"

namespace lt::exec {
namespace {

using testing::TestOptimizer;
using train::testing::TempDir;

constexpr int kLayers = 6;

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.data_ptr());
  return {p, p + t.nbytes()};
}

struct Trained {
  std::vector<double> losses;
  std::vector<std::vector<unsigned char>> params, states;
};

StreamingOptions placed(const std::vector<bool>& on_disk, const TempDir& dir) {
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(kLayers);
  so.states_on_disk = on_disk;
  so.disk.directory = dir.path().string();
  return so;
}

// Three steps with the stages `on_disk` on disk, their states made without
// memory when `without_memory`.
Trained train(TestOptimizer kind, const std::vector<bool>& on_disk, bool without_memory) {
  const TempDir dir("states_made_on_disk");
  models::CausalLM model = testing::random_fixture_model("llama", kLayers);
  auto opt = testing::test_optimizer(
      model, kind, without_memory ? flags_per_parameter(model, on_disk) : std::vector<bool>{});
  StreamingExecutor ex(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}),
                       placed(on_disk, dir));
  Generator gen(9);
  Trained r;
  for (int s = 0; s < 3; ++s) {
    StepOptions o;
    o.lr = 3e-3;
    o.max_grad_norm = 0.05;
    r.losses.push_back(
        ex.step({lt::testing::random_token_batch(gen, 2, 9, model.config().vocab_size)}, o).loss);
  }
  ex.sync();
  for (const auto& [name, p] : model.parameters()) r.params.push_back(bytes_of(p));
  for (const auto& [name, t] : opt->state()) r.states.push_back(bytes_of(t));
  return r;
}

TEST(StatesMadeOnDisk, TrainAsTheHostPlacedRunBitForBit) {
  const size_t stages = kLayers + 2;
  std::vector<bool> some(stages, false);
  some[2] = some[3] = some[5] = some[stages - 1] = true;
  for (TestOptimizer kind : {TestOptimizer::AdamW, TestOptimizer::AdamW8bit}) {
    const Trained want = train(kind, std::vector<bool>(stages, false), false);
    EXPECT_NE(want.losses.front(), want.losses.back());
    for (const auto& on_disk : {std::vector<bool>(stages, true), some}) {
      SCOPED_TRACE(std::string(kind == TestOptimizer::AdamW ? "adamw" : "adamw8bit") +
                   (on_disk == some ? " some stages" : " every stage"));
      const Trained got = train(kind, on_disk, true);
      EXPECT_EQ(want.losses, got.losses);
      EXPECT_TRUE(want.params == got.params);
      ASSERT_EQ(want.states.size(), got.states.size());
      for (size_t i = 0; i < want.states.size(); ++i)
        EXPECT_TRUE(want.states[i] == got.states[i]) << i;
    }
  }
}

// The extra host memory held at the peak of building the optimizer and the
// executor, with every stage on disk.
int64_t build_peak(bool without_memory, int64_t& all_states) {
  const TempDir dir("states_made_peak");
  models::CausalLM model = testing::random_fixture_model("llama", kLayers);
  const std::vector<bool> on_disk(kLayers + 2, true);
  const int64_t before = cpu_allocator().stats().current_bytes;
  cpu_allocator().reset_peak();
  auto opt = testing::test_optimizer(
      model, TestOptimizer::AdamW,
      without_memory ? flags_per_parameter(model, on_disk) : std::vector<bool>{});
  StreamingExecutor ex(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}),
                       placed(on_disk, dir));
  const int64_t peak = cpu_allocator().stats().peak_bytes - before;
  all_states = 0;
  for (const auto& [name, p] : model.parameters()) all_states += 8 * p.numel();  // m, v
  return peak;
}

TEST(StatesMadeOnDisk, BuildingTheRunHoldsLessThanEveryStagesStates) {
  int64_t all_states = 0;
  // Made first, as before: the optimizer alone holds them all.
  EXPECT_GE(build_peak(false, all_states), all_states);
  // Made a stage at a time: the stand-in's f32 upload copies and the
  // gradient slabs (4 bytes a parameter each, the masters gone to disk
  // first) and a stage's states.
  EXPECT_LT(build_peak(true, all_states), all_states);
}

TEST(StatesMadeOnDisk, AStateWithoutMemoryInAHostStageIsAnError) {
  const TempDir dir("states_made_error");
  models::CausalLM model = testing::random_fixture_model("llama", kLayers);
  std::vector<bool> on_disk(kLayers + 2, true);
  auto opt =
      testing::test_optimizer(model, TestOptimizer::AdamW, flags_per_parameter(model, on_disk));
  on_disk[1] = false;  // block 0 stays in host memory
  const std::string e = testing::error_of([&] {
    StreamingExecutor ex(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}),
                         placed(on_disk, dir));
  });
  EXPECT_NE(e.find("without memory"), std::string::npos) << e;
  EXPECT_NE(e.find("state 'block.0."), std::string::npos) << e;
}

}  // namespace
}  // namespace lt::exec
