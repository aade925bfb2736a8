// The working sets `lazytrain profile --model` measures (plan/profile.cpp)
// bound what the streaming executor holds: a stand-in device with exactly
// the bytes that exec::bytes_needed counts from them runs a step without
// running out of memory, at the chunk sizes measured and at a larger one
// (the line extrapolated), with a block's or the head's working set the
// larger. And they are not far above it: the step's peak reaches 65% of
// that budget (77-95% here, less where the stand-in's gradient downloads
// land before the two-in-flight the budget allows for; the block estimate's
// budget is 57-65% used).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include "core/random.h"
#include "exec/memory_budget.h"
#include "exec/stand_in_device.h"
#include "exec/streaming.h"
#include "optim/adamw.h"
#include "plan/profile.h"
#include "support/random_batch.h"

namespace lt::exec {
namespace {

models::ModelConfig fixture(const std::string& family, int64_t vocab) {
  models::ModelConfig config =
      models::ModelConfig::from_file(std::filesystem::path(LT_SOURCE_DIR) /
                                     "tests/models/fixtures/families" / family / "config.json");
  config.vocab_size = vocab;
  return config;
}

struct AtBudget {
  int64_t budget = 0;     // the GPU bytes bytes_needed counts
  int64_t estimated = 0;  // the same without the measured working sets
  int64_t peak = 0;       // the stand-in's peak in the step
};

// One step of 4 sequences of `seq` tokens in chunks of `chunk`, every
// boundary on a stand-in device holding exactly the budget.
AtBudget step_at_measured_budget(const models::ModelConfig& config, int64_t seq, int64_t chunk,
                                 int64_t max_copy_delay_us = 0) {
  const plan::StageTimes t = plan::measure_stage_times(config, seq, {1, 2}, Device::cpu(), 1);
  EXPECT_TRUE(t.has_working_sets());
  Schedule schedule = Schedule::all_gpu(static_cast<int>(config.num_hidden_layers));
  schedule.batch_size = 4;
  schedule.chunk_sequences = chunk;
  TrainSizes sizes{4, seq, OptimizerStates::Fp32, 4, {}, {}, 2048, false};
  AtBudget r;
  r.estimated = bytes_needed(config, sizes, schedule).bytes(MemorySpace::Gpu);
  sizes.measured_block_backward = {t.block_backward_bytes.a, t.block_backward_bytes.b};
  sizes.measured_head_step = {t.head_step_bytes.a, t.head_step_bytes.b};
  r.budget = bytes_needed(config, sizes, schedule).bytes(MemorySpace::Gpu);

  Generator gen(5);
  models::CausalLM model = models::CausalLM::random(config, gen);
  optim::AdamW opt(model.parameters(), optim::AdamWOptions{});
  Generator data(17);
  const std::vector<data::Batch> batch = {
      lt::testing::random_token_batch(data, 4, seq, config.vocab_size, {0, 1})};
  StandInOptions device;
  device.capacity_bytes = r.budget;
  device.max_copy_delay_us = max_copy_delay_us;
  StreamingOptions so;
  so.schedule = schedule;
  StreamingExecutor streaming(model, opt, std::make_unique<StandInDevice>(device), so);
  const StepStats stats = streaming.step(batch, {});  // throws "out of memory" past the capacity
  streaming.sync();
  EXPECT_TRUE(std::isfinite(stats.loss));
  r.peak = stats.peak_bytes.at("device");
  return r;
}

// The step at each chunking stays within the budget (it would have run out
// of memory otherwise) and reaches 65% of it. Returns the runs.
std::vector<AtBudget> expect_within_budget(const models::ModelConfig& config, int64_t seq,
                                           const std::vector<int64_t>& chunks,
                                           int64_t max_copy_delay_us = 0) {
  std::vector<AtBudget> runs;
  for (int64_t chunk : chunks) {
    runs.push_back(step_at_measured_budget(config, seq, chunk, max_copy_delay_us));
    const AtBudget& r = runs.back();
    EXPECT_LE(r.peak, r.budget) << chunk;
    EXPECT_GE(static_cast<double>(r.peak), 0.65 * static_cast<double>(r.budget)) << chunk;
  }
  return runs;
}

TEST(MeasuredWorkingSets, BoundTheStepWhereABlockIsTheLarger) {
  for (const AtBudget& r : expect_within_budget(fixture("llama", 97), 64, {1, 2, 4}))
    EXPECT_LT(r.budget, r.estimated);  // the estimate overstates a block's
}

TEST(MeasuredWorkingSets, BoundTheStepWhereTheHeadIsTheLarger) {
  expect_within_budget(fixture("llama", 65536), 32, {1, 2, 4});
}

// A tied embedding (qwen2): the head step reads the embedding matrix, and
// the embed stage's backward adds its dense gradient into the one the head
// built. With short sequences (small loss chunks) and a wide FFN the
// budget's peak is the embed stage's backward: the embedding matrix in its
// slot, its gradient and the dense one, beside two blocks' gradients that
// may still be downloading: each copy here waits up to 20 ms, so they do.
// Without the dense gradient in the budget this runs out of memory.
TEST(MeasuredWorkingSets, BoundTheStepOfATiedModel) {
  models::ModelConfig wide = fixture("qwen2", 65536);
  ASSERT_TRUE(wide.tie_word_embeddings);
  wide.intermediate_size = 8192;
  expect_within_budget(wide, 8, {1, 2, 4}, 20000);
}

// Untied (llama), in several chunks: each chunk's embed backward makes a
// dense embedding gradient and adds it into the earlier chunks' .grad
// (copies delayed as above; without that gradient counted, out of memory).
TEST(MeasuredWorkingSets, BoundTheStepOfAnUntiedModelInChunks) {
  models::ModelConfig wide = fixture("llama", 65536);
  ASSERT_FALSE(wide.tie_word_embeddings);
  wide.intermediate_size = 8192;
  expect_within_budget(wide, 8, {1, 2}, 20000);
}

}  // namespace
}  // namespace lt::exec
