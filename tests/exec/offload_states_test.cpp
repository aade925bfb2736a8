// exec.state_placement for the offload executor and its ZenFlow policy
// (Note [Offload states on disk]): with some or every stage's f32 masters
// and optimizer states on disk, the run gives the host-placed run's
// losses, weights and optimizer states bit for bit (adamw and adamw8bit),
// also with sync_masters() in the middle (every stage read back, then
// written out again), and with the disk stages' masters and optimizer
// states made without memory and filled a stage at a time as the executor
// writes them out; the scratch file goes with the executor; a changed byte
// in it stops the run with an error that names the file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "core/random.h"
#include "exec/offload.h"
#include "exec/staged_states.h"
#include "exec/stand_in_device.h"
#include "support/errors.h"
#include "support/failing_optimizer.h"
#include "support/fixture_models.h"
#include "support/random_batch.h"
#include "support/state_files.h"
#include "train/train_helpers.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;

using lt::testing::bytes_of;
using lt::testing::flip_byte;

using testing::TestOptimizer;
using train::testing::TempDir;
constexpr TestOptimizer AdamW = TestOptimizer::AdamW, AdamW8bit = TestOptimizer::AdamW8bit;
constexpr int kLayers = 3;  // stages: embed, blocks 0..2, head

struct Result {
  std::vector<double> losses, grad_norms;
  int64_t states_read_bytes = 0, states_write_bytes = 0;  // as the steps' stats say
  std::vector<std::vector<unsigned char>> params, states;
};

// ZenFlow proper: a quarter of the columns on the device, windows of two
// steps, the CPU update one window late, reselection every 3 steps.
OffloadOptions zenflow() {
  OffloadOptions o;
  o.zenflow = true;
  o.zenflow_options.topk_ratio = 0.25;
  o.zenflow_options.update_interval = 2;
  o.zenflow_options.overlap_step = true;
  o.zenflow_options.select_strategy = SelectStrategy::Step;
  o.zenflow_options.select_interval = 3;
  o.zenflow_options.full_warm_up_rounds = 1;
  return o;
}

// Steps [first, last) of `data`; then sync_masters() and a copy of every
// weight and optimizer state (what a checkpoint saves).
void train_steps(Executor& executor, const models::CausalLM& model, optim::Optimizer& opt,
                 const std::vector<std::vector<data::Batch>>& data, size_t first, size_t last,
                 Result& r) {
  for (size_t s = first; s < last; ++s) {
    StepOptions o;
    o.lr = 3e-3 * (1.0 + 0.1 * static_cast<double>(s));
    o.max_grad_norm = 0.05;  // every step clips
    const StepStats st = executor.step(data[s], o);
    r.losses.push_back(st.loss);
    r.grad_norms.push_back(st.grad_norm);
    r.states_read_bytes += st.states_read_bytes;
    r.states_write_bytes += st.states_write_bytes;
  }
  executor.sync_masters();
  r.params.clear();
  r.states.clear();
  for (const auto& [name, p] : model.parameters()) r.params.push_back(bytes_of(p));
  for (const auto& [name, t] : opt.state()) r.states.push_back(bytes_of(t));
}

// The llama fixture with kLayers blocks, as random_fixture_model draws it;
// with `without_memory` (per stage), those stages' parameters without
// memory, their values drawn later from `starts` (fill_random_stage).
models::CausalLM llama(const std::vector<bool>& without_memory,
                       std::map<size_t, Generator>& starts) {
  models::ModelConfig config = testing::random_fixture_model("llama", 1).config();
  config.num_hidden_layers = kLayers;
  Generator gen(23);
  return models::CausalLM::random(config, gen, DType::F32, without_memory, starts);
}

// `steps` steps of the offload executor with `options` (states_on_disk
// among them), sync_masters() after `split` of them as well. With
// `made_on_disk`, the disk stages' masters and optimizer states are made
// without memory and get it (and their values) as the executor writes
// them out (Note [Stage states on disk], "the start").
Result run(TestOptimizer kind, OffloadOptions options, int steps, size_t split, const fs::path& dir,
           bool made_on_disk = false) {
  std::map<size_t, Generator> starts;
  const std::vector<bool> without_memory =
      made_on_disk ? options.states_on_disk : std::vector<bool>{};
  models::CausalLM model = llama(without_memory, starts);
  auto opt = testing::test_optimizer(model, kind, flags_per_parameter(model, without_memory));
  if (made_on_disk)
    options.fill_masters = [&](size_t s) { model.fill_random_stage(s, starts.at(s)); };
  const auto data = lt::testing::state_test_batches(steps, model.config().vocab_size);
  options.state_file.directory = dir.string();
  options.state_file.file.chunk_bytes = 8192;
  options.max_optimizer_delay_us = 300;  // the pipeline must not depend on timing
  options.max_state_io_delay_us = 300;
  Result r;
  {
    OffloadExecutor executor(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}),
                             options);
    train_steps(executor, model, *opt, data, 0, split, r);
    train_steps(executor, model, *opt, data, split, data.size(), r);
    if (!options.states_on_disk.empty()) {
      EXPECT_FALSE(fs::is_empty(dir));
    }
  }
  EXPECT_TRUE(fs::is_empty(dir)) << "the scratch file outlived the executor";
  return r;
}

void expect_same(const Result& want, const Result& got) {
  ASSERT_EQ(want.losses.size(), got.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s) {
    EXPECT_EQ(want.losses[s], got.losses[s]) << "step " << s;
    EXPECT_EQ(want.grad_norms[s], got.grad_norms[s]) << "step " << s;
  }
  ASSERT_EQ(want.params.size(), got.params.size());
  for (size_t i = 0; i < want.params.size(); ++i)
    EXPECT_TRUE(want.params[i] == got.params[i]) << "parameter " << i;
  ASSERT_EQ(want.states.size(), got.states.size());
  for (size_t i = 0; i < want.states.size(); ++i)
    EXPECT_TRUE(want.states[i] == got.states[i]) << "state " << i;
}

void check_placements(const OffloadOptions& mode, int steps) {
  for (TestOptimizer kind : {AdamW, AdamW8bit}) {
    const TempDir dir("offload_states");
    const Result want = run(kind, mode, steps, 2, dir.path());
    EXPECT_NE(want.losses.front(), want.losses.back()) << "the updates should move the loss";
    // Every stage; more disk stages than the read-ahead between host ones;
    // the embedding alone.
    for (const std::vector<bool>& on_disk : {std::vector<bool>(kLayers + 2, true),
                                             {false, true, false, true, true},
                                             {true, false, false, false, false}}) {
      SCOPED_TRACE(std::string(kind == AdamW ? "adamw" : "adamw8bit") + ", disk stages " +
                   std::to_string(std::count(on_disk.begin(), on_disk.end(), true)));
      OffloadOptions o = mode;
      o.states_on_disk = on_disk;
      o.state_file.file.force_threads = on_disk[1];  // the threaded fallback, for some
      for (bool made_on_disk : {false, true}) {
        SCOPED_TRACE(made_on_disk ? "masters and states made stage by stage" : "made whole");
        const Result got = run(kind, o, steps, 2, dir.path(), made_on_disk);
        expect_same(want, got);
        // The steps' stats count the disk stages' reads and write-backs.
        EXPECT_GT(got.states_read_bytes, 0);
        EXPECT_EQ(got.states_read_bytes, got.states_write_bytes);
      }
    }
  }
}

TEST(OffloadStates, DiskGivesTheHostRunBitForBit) {
  check_placements(OffloadOptions{}, 4);
}

TEST(OffloadStates, ZenFlowWithDiskGivesTheHostRunBitForBit) {
  // Warm-up, two reselections, windows ended by a step and by sync_masters().
  check_placements(zenflow(), 7);
}

TEST(OffloadStates, AFlippedByteIsAnErrorNamingTheFile) {
  for (const OffloadOptions& mode : {OffloadOptions{}, zenflow()}) {
    SCOPED_TRACE(mode.zenflow ? "zenflow" : "offload");
    const TempDir dir("offload_flip");
    models::CausalLM model = testing::random_fixture_model("llama", kLayers);
    auto opt = testing::test_optimizer(model, AdamW);
    const auto data = lt::testing::state_test_batches(3, model.config().vocab_size);
    OffloadOptions o = mode;
    o.zenflow_options.update_interval = 1;  // a CPU update at every step
    o.states_on_disk.assign(kLayers + 2, true);
    o.state_file.directory = dir.path().string();
    OffloadExecutor executor(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}), o);
    StepOptions so;
    so.lr = 1e-3;
    executor.step(data[0], so);
    executor.sync_staged();  // every update and write-back done
    ASSERT_EQ(1, std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()));
    const std::string path = fs::directory_iterator(dir.path())->path().string();
    flip_byte(path, 100);  // in the first region: the first disk stage's first tensor
    const std::string error = lt::testing::error_of([&] {
      executor.step(data[1], so);
      executor.step(data[2], so);
      executor.sync_staged();
    });
    EXPECT_NE(error.find(path), std::string::npos) << error;
    EXPECT_NE(error.find("checksum"), std::string::npos) << error;
  }
}

// A window's CPU update that fails (here the optimizer's update of the
// first block; a failed read or write-back of a disk stage is the same
// ticket) stops the step that merges it, with the update's error: ZenFlow
// waits for every stage's update and write-back, where before it dropped
// their tickets and merged a stale stage without a word (a full disk at a
// write-back was never reported: the file still held the old region).
TEST(OffloadStates, ZenFlowStopsAtTheMergeOfAWindowWhoseUpdateFailed) {
  for (const bool disk : {false, true}) {
    SCOPED_TRACE(disk ? "states on disk" : "states in host memory");
    const TempDir dir("zenflow_fail");
    models::CausalLM model = testing::random_fixture_model("llama", kLayers);
    nn::NamedParameters params = model.parameters();
    size_t first_block = 0;  // the first parameter of stage 1 (block 0)
    {
      nn::NamedParameters embed;
      model.stages()[0]->collect(embed);
      first_block = embed.size();
    }
    // In host memory ZenFlow updates every parameter in one call (from 0).
    FailingOptimizer optimizer(params, /*fail_step=*/1, disk ? first_block : 0);
    const auto data = lt::testing::state_test_batches(5, model.config().vocab_size);
    OffloadOptions o = zenflow();
    o.zenflow_options.update_interval = 1;  // a CPU update at every step
    if (disk) o.states_on_disk.assign(kLayers + 2, true);
    o.state_file.directory = dir.path().string();
    OffloadExecutor executor(model, optimizer, std::make_unique<StandInDevice>(StandInOptions{}),
                             o);
    StepOptions so;
    so.lr = 1e-3;
    const std::string error = lt::testing::error_of([&] {
      for (const auto& batch : data) executor.step(batch, so);
    });
    EXPECT_NE(error.find("injected failure"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace lt::exec
