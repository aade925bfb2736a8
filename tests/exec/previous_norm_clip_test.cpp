// train.clip_with_previous_norm (Note [Updates during the backward],
// exec/streaming_early_updates.cpp):
//  - the clip factor a step uses is clip_scale of the step before's norm
//    (checked by hand), and the resident executor's update with it is the
//    update an exact-clipping step makes when its threshold is chosen to
//    give that same factor;
//  - the streaming executor, updating each stage during the backward, gives
//    the resident executor's losses and weights bit for bit (adamw and
//    adamw8bit; states in host memory and on disk; tied and untied
//    embeddings), with random delays on the optimizer and states threads;
//  - a stage whose gradient is not finite is not updated, nor any stage
//    after it in backward order; those before keep their update, and the
//    step is reported skipped with how many were updated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "core/random.h"
#include "exec/resident.h"
#include "exec/streaming.h"
#include "optim/clip.h"
#include "support/fixture_models.h"
#include "support/random_batch.h"
#include "train/train_helpers.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;

using testing::TestOptimizer;
using train::testing::TempDir;
constexpr double kNoNorm = std::numeric_limits<double>::quiet_NaN();
constexpr double kClip = 0.05;  // small enough that every step of these models clips

std::vector<std::vector<data::Batch>> batches(int steps, int micro, int64_t vocab) {
  Generator gen(9);
  std::vector<std::vector<data::Batch>> out(static_cast<size_t>(steps));
  for (auto& step : out)
    for (int m = 0; m < micro; ++m)
      step.push_back(lt::testing::random_token_batch(gen, 2, 9, vocab));
  return out;
}

StepOptions step_options(size_t step, double previous_norm) {
  StepOptions o;
  o.lr = 3e-3 * (1.0 + 0.1 * static_cast<double>(step));
  o.max_grad_norm = kClip;
  o.clip_with_previous_norm = true;
  o.previous_grad_norm = previous_norm;
  return o;
}

struct RunResult {
  std::vector<StepStats> stats;
  std::vector<std::vector<unsigned char>> params;
};

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.data_ptr());
  return {p, p + t.nbytes()};
}

// Each step clips with the norm the executor reported for the step before,
// as the trainer does.
RunResult run(Executor& executor, const models::CausalLM& model,
              const std::vector<std::vector<data::Batch>>& data) {
  RunResult r;
  double previous = kNoNorm;
  for (size_t s = 0; s < data.size(); ++s) {
    r.stats.push_back(executor.step(data[s], step_options(s, previous)));
    previous = r.stats.back().skipped ? kNoNorm : r.stats.back().grad_norm;
  }
  executor.sync();
  for (const auto& [name, p] : model.parameters()) r.params.push_back(bytes_of(p));
  return r;
}

TEST(ClipWithPreviousNorm, TheFactorIsThePreviousNormsByHand) {
  StepOptions o;
  o.max_grad_norm = 1.0;
  o.previous_grad_norm = 4.0;
  EXPECT_FALSE(clip_scale_before_backward(o)) << "off: exact clipping";
  o.clip_with_previous_norm = true;
  EXPECT_EQ(*clip_scale_before_backward(o), 1.0 / (4.0 + 1e-6));
  o.previous_grad_norm = 0.5;
  EXPECT_EQ(*clip_scale_before_backward(o), 1.0);  // under the threshold: no clipping
  o.previous_grad_norm = kNoNorm;
  EXPECT_FALSE(clip_scale_before_backward(o)) << "no previous norm: exact clipping";
  o.previous_grad_norm = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(clip_scale_before_backward(o));
  o.max_grad_norm = 0;
  EXPECT_EQ(*clip_scale_before_backward(o), 1.0) << "clipping off: known from the start";
}

// Step t of the resident executor with the option is step t of an exact
// run whose threshold is set to give clip_scale(norm of step t-1): the
// exact run clips with max' / (norm_t + 1e-6), and max' = factor *
// (norm_t + 1e-6). So step t used the previous norm, not its own.
TEST(ClipWithPreviousNorm, ResidentUsesThePreviousStepsFactor) {
  const auto data = batches(3, 2, testing::random_fixture_model("llama", 2).config().vocab_size);
  models::CausalLM a_model = testing::random_fixture_model("llama", 2);
  auto a_opt = testing::test_optimizer(a_model, TestOptimizer::AdamW);
  ResidentExecutor a(a_model, *a_opt);
  const RunResult with = run(a, a_model, data);

  models::CausalLM b_model = testing::random_fixture_model("llama", 2);
  auto b_opt = testing::test_optimizer(b_model, TestOptimizer::AdamW);
  ResidentExecutor b(b_model, *b_opt);
  for (size_t s = 0; s < data.size(); ++s) {
    StepOptions o = step_options(s, kNoNorm);
    o.clip_with_previous_norm = false;
    if (s > 0) {
      const double factor = optim::clip_scale(with.stats[s - 1].grad_norm, kClip);
      ASSERT_LT(factor, 1.0) << "clipping should be active";
      // The norms differ from step to step, so the two factors differ.
      ASSERT_NE(factor, optim::clip_scale(with.stats[s].grad_norm, kClip));
      o.max_grad_norm = factor * (with.stats[s].grad_norm + 1e-6);
    }
    const StepStats st = b.step(data[s], o);
    EXPECT_EQ(st.loss, with.stats[s].loss) << "step " << s;
    EXPECT_EQ(st.grad_norm, with.stats[s].grad_norm) << "step " << s;
  }
  const auto params = b_model.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(bytes_of(params[i].second) == with.params[i]) << params[i].first;
}

struct Case {
  const char* family = "llama";  // llama: untied; qwen2: tied embeddings
  TestOptimizer optimizer = TestOptimizer::AdamW;
  std::vector<bool> on_disk;   // per stage; empty: all in host memory
  int tail_blocks = 0;         // Schedule::tail_blocks
  std::vector<int> on_device;  // Schedule::stages_on_device
};

void expect_streaming_is_resident(const Case& c) {
  constexpr int kLayers = 3;
  // Tied embeddings with one micro-batch: the same additions in the same
  // order as resident (tests/exec/streaming_test.cpp says why several differ).
  const int micro = std::string(c.family) == "qwen2" ? 1 : 2;
  const auto data =
      batches(4, micro, testing::random_fixture_model(c.family, kLayers).config().vocab_size);
  models::CausalLM ref_model = testing::random_fixture_model(c.family, kLayers);
  auto ref_opt = testing::test_optimizer(ref_model, c.optimizer);
  ResidentExecutor resident(ref_model, *ref_opt);
  const RunResult want = run(resident, ref_model, data);

  const TempDir dir("previous_norm");
  models::CausalLM model = testing::random_fixture_model(c.family, kLayers);
  auto opt = testing::test_optimizer(model, c.optimizer);
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(kLayers);
  so.schedule.tail_blocks = c.tail_blocks;
  so.schedule.stages_on_device = c.on_device;
  so.states_on_disk = c.on_disk;
  so.disk.directory = dir.path().string();
  so.max_optimizer_delay_us = 300;  // the pipeline must not depend on timing
  so.max_state_io_delay_us = 300;
  StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}), so);
  const RunResult got = run(streaming, model, data);

  for (size_t s = 0; s < data.size(); ++s) {
    EXPECT_EQ(want.stats[s].loss, got.stats[s].loss) << "step " << s;
    EXPECT_NEAR(want.stats[s].grad_norm, got.stats[s].grad_norm, 1e-12 * want.stats[s].grad_norm);
    EXPECT_FALSE(got.stats[s].skipped);
  }
  EXPECT_NE(want.stats.front().loss, want.stats.back().loss);
  const auto names = model.parameters();
  ASSERT_EQ(want.params.size(), got.params.size());
  for (size_t i = 0; i < want.params.size(); ++i)
    EXPECT_TRUE(want.params[i] == got.params[i]) << names[i].first << " differs from resident";
}

TEST(ClipWithPreviousNorm, StreamingIsResidentHostStates) {
  for (const char* family : {"llama", "qwen2"})
    for (TestOptimizer kind : {TestOptimizer::AdamW, TestOptimizer::AdamW8bit}) {
      SCOPED_TRACE(std::string(family) + (kind == TestOptimizer::AdamW ? " adamw" : " adamw8bit"));
      expect_streaming_is_resident({family, kind, {}, 0, {}});
    }
}

// A fused tail (Note [The fused tail], exec/streaming_plan.cpp): its
// stages' gradients go out as one download, and each stage's update is
// queued behind it.
TEST(ClipWithPreviousNorm, StreamingIsResidentWithAFusedTail) {
  for (int tail : {1, 2, 3})
    for (const char* family : {"llama", "qwen2"}) {
      SCOPED_TRACE(std::string(family) + ", tail of " + std::to_string(tail));
      expect_streaming_is_resident({family, TestOptimizer::AdamW, {}, tail, {}});
    }
}

// Stages kept on the device (Note [Stages on the device]) update there, in
// the backward's order with the streamed ones: the embedding first and last
// in that order (tied: the head's matrix too), a block in the middle, the
// head, with and without a fused tail holding a device stage.
TEST(ClipWithPreviousNorm, StreamingIsResidentWithStagesOnTheDevice) {
  for (const std::vector<int>& on_device :
       {std::vector<int>{0}, std::vector<int>{0, 2}, std::vector<int>{0, 1, 2, 3, 4}})
    for (int tail : {0, 2})
      for (const char* family : {"llama", "qwen2"})
        for (TestOptimizer kind : {TestOptimizer::AdamW, TestOptimizer::AdamW8bit}) {
          SCOPED_TRACE(std::string(family) +
                       (kind == TestOptimizer::AdamW ? " adamw" : " adamw8bit") + ", " +
                       std::to_string(on_device.size()) + " on the device, tail of " +
                       std::to_string(tail));
          expect_streaming_is_resident({family, kind, {}, tail, on_device});
        }
  // The head alone (untied: it owns its matrix), and blocks of the tail.
  expect_streaming_is_resident({"llama", TestOptimizer::AdamW, {}, 2, {3, 4}});
}

TEST(ClipWithPreviousNorm, StreamingIsResidentStatesOnDisk) {
  // Stages: embed, blocks 0..2, head. Every one; the last blocks and the
  // head (as exec.state_placement auto picks them); blocks apart, the embed
  // (the tied matrix's owner) too.
  for (const std::vector<bool>& on_disk : {std::vector<bool>(5, true),
                                           {false, false, true, true, true},
                                           {true, true, false, true, false}})
    for (const char* family : {"llama", "qwen2"})
      for (TestOptimizer kind : {TestOptimizer::AdamW, TestOptimizer::AdamW8bit}) {
        SCOPED_TRACE(std::string(family) +
                     (kind == TestOptimizer::AdamW ? " adamw" : " adamw8bit") + " disk " +
                     std::to_string(std::count(on_disk.begin(), on_disk.end(), true)));
        expect_streaming_is_resident({family, kind, on_disk, 0, {}});
      }
}

// Step 1's gradient of block 1 (stage 2) is made NaN as its backward ends:
// the head (stage 4) and block 2 (stage 3) were updated before its update
// came up, block 1, block 0 and the embed not. Without the option, nothing.
// The same with block 2 and the embed kept on the device (updated there, in
// the same order), and with every state on disk.
TEST(ClipWithPreviousNorm, ANonFiniteStageStopsTheUpdatesAfterIt) {
  constexpr int kLayers = 3;
  constexpr int kPoisoned = 2;
  enum class States { Host, Disk, Device };
  for (bool option : {true, false})
    for (States states : {States::Host, States::Disk, States::Device}) {
      const bool disk = states == States::Disk;
      SCOPED_TRACE(std::string(option ? "on" : "off") + (disk                       ? " disk"
                                                         : states == States::Device ? " device"
                                                                                    : " host"));
      const TempDir dir("previous_norm_nan");
      models::CausalLM model = testing::random_fixture_model("llama", kLayers);
      auto opt = testing::test_optimizer(model, TestOptimizer::AdamW);
      const auto data = batches(3, 2, model.config().vocab_size);
      bool poison = false;
      StreamingOptions so;
      so.schedule = Schedule::all_gpu(kLayers);
      if (disk) so.states_on_disk.assign(kLayers + 2, true);
      if (states == States::Device) so.schedule.stages_on_device = {0, kPoisoned + 1};
      so.disk.directory = dir.path().string();
      so.max_optimizer_delay_us = 300;
      std::vector<StageUse> uses;
      so.observe_use = [&](size_t u, bool computed) {
        if (!poison || !computed || uses[u].stage != kPoisoned ||
            uses[u].work != StageWork::Backward)
          return;
        nn::NamedParameters params;
        model.stages()[kPoisoned]->collect(params);
        Tensor g = params.front().second.grad();
        ASSERT_TRUE(g.defined());
        g.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
      };
      StreamingExecutor ex(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}), so);
      uses = ex.stage_uses();
      StepOptions o = step_options(0, kNoNorm);
      o.clip_with_previous_norm = option;
      const StepStats first = ex.step(data[0], o);
      ASSERT_FALSE(first.skipped);
      ex.sync();
      std::vector<std::vector<unsigned char>> before;
      for (const auto& [name, p] : model.parameters()) before.push_back(bytes_of(p));

      poison = true;
      o = step_options(1, first.grad_norm);
      o.clip_with_previous_norm = option;
      const StepStats bad = ex.step(data[1], o);
      EXPECT_TRUE(bad.skipped);
      EXPECT_FALSE(std::isfinite(bad.grad_norm));
      EXPECT_TRUE(std::isfinite(bad.loss));
      EXPECT_EQ(bad.stages_updated_before_skip, option ? 2 : 0);
      ex.sync();
      size_t i = 0;
      for (size_t s = 0; s < model.stages().size(); ++s) {
        const bool updated = option && s > kPoisoned;
        nn::NamedParameters own;
        model.stages()[s]->collect(own);
        for (const auto& [name, p] : own) EXPECT_EQ(bytes_of(p) != before[i++], updated) << name;
      }
      // The run goes on: a later step (exact, having no previous norm)
      // updates every stage.
      poison = false;
      o = step_options(2, kNoNorm);
      o.clip_with_previous_norm = option;
      EXPECT_FALSE(ex.step(data[2], o).skipped);
    }
}

}  // namespace
}  // namespace lt::exec
