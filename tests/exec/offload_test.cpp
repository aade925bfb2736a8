// The offload executor (synchronous and ZenFlow) on the CPU stand-in
// device, against the resident executor (the reference): the synchronous
// offload, and ZenFlow with every column on the device and a window of one
// step, do resident's arithmetic in resident's order, so losses, gradient
// norms and parameters are bitwise equal. ZenFlow proper (a share of the
// columns, windows, overlap) is checked for determinism under injected
// delays here; its convergence is checked on the demo corpus in
// tests/train/zenflow_convergence_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/random.h"
#include "exec/offload.h"
#include "exec/resident.h"
#include "exec/stand_in_device.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "support/executor_steps.h"
#include "support/random_batch.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;

models::CausalLM load_family(const std::string& family) {
  return io::load_hf_model(fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families" / family);
}

optim::AdamWOptions adam_options() {
  optim::AdamWOptions o;
  o.lr = 3e-3;
  o.weight_decay = 0.01;
  return o;
}

const std::vector<std::string> kNoDecay = {"norm"};

std::unique_ptr<optim::Optimizer> make_optimizer(const models::CausalLM& model, bool eight_bit) {
  if (!eight_bit)
    return std::make_unique<optim::AdamW>(model.parameters(), adam_options(), kNoDecay);
  optim::AdamW8bitOptions o8;
  o8.min_8bit_numel = 512;
  o8.block_size = 256;
  return std::make_unique<optim::AdamW8bit>(model.parameters(), adam_options(), kNoDecay, o8);
}

// `steps` batches of `micro` micro-batches of 2 rows of 7 or 10 tokens.
std::vector<std::vector<data::Batch>> make_batches(int steps, int micro, int64_t vocab) {
  Generator gen(5);
  std::vector<std::vector<data::Batch>> out(static_cast<size_t>(steps));
  for (auto& step : out) {
    for (int m = 0; m < micro; ++m)
      step.push_back(lt::testing::random_token_batch(gen, 2, 7 + (m % 2) * 3, vocab, {0, 1}));
  }
  return out;
}

using RunResult = lt::testing::ExecutorRun;

RunResult run(Executor& executor, const models::CausalLM& model,
              const std::vector<std::vector<data::Batch>>& batches, double max_grad_norm) {
  return lt::testing::run_executor_steps(executor, model, batches, max_grad_norm);
}

struct Case {
  std::string family = "llama";
  int micro = 2;
  int steps = 4;
  bool eight_bit = false;
  double max_grad_norm = 0.05;  // small enough that every step clips
  OffloadOptions offload;
  StandInOptions device;
};

RunResult run_offload(const Case& c) {
  models::CausalLM model = load_family(c.family);
  auto opt = make_optimizer(model, c.eight_bit);
  OffloadOptions o = c.offload;
  o.adam = adam_options();
  o.no_decay = kNoDecay;
  OffloadExecutor executor(model, *opt, std::make_unique<StandInDevice>(c.device), o);
  const auto batches = make_batches(c.steps, c.micro, model.config().vocab_size);
  return run(executor, model, batches, c.max_grad_norm);
}

RunResult run_resident(const Case& c) {
  models::CausalLM model = load_family(c.family);
  auto opt = make_optimizer(model, c.eight_bit);
  ResidentExecutor executor(model, *opt);
  const auto batches = make_batches(c.steps, c.micro, model.config().vocab_size);
  return run(executor, model, batches, c.max_grad_norm);
}

void expect_bitwise_equal(const RunResult& ref, const RunResult& got) {
  ASSERT_EQ(ref.stats.size(), got.stats.size());
  for (size_t s = 0; s < ref.stats.size(); ++s) {
    EXPECT_EQ(ref.stats[s].loss, got.stats[s].loss) << "step " << s;
    EXPECT_EQ(ref.stats[s].grad_norm, got.stats[s].grad_norm) << "step " << s;
    EXPECT_FALSE(got.stats[s].skipped);
  }
  EXPECT_NE(ref.stats.front().loss, ref.stats.back().loss) << "the updates should move the loss";
  ASSERT_EQ(ref.params.size(), got.params.size());
  for (size_t i = 0; i < ref.params.size(); ++i) {
    ASSERT_EQ(ref.params[i].size(), got.params[i].size());
    EXPECT_EQ(0, std::memcmp(ref.params[i].data(), got.params[i].data(),
                             ref.params[i].size() * sizeof(float)))
        << "parameter " << i << " differs from resident";
  }
}

TEST(Offload, SynchronousEqualsResidentBitwise) {
  for (const char* family : {"llama", "qwen2", "qwen3", "gpt2"}) {
    SCOPED_TRACE(family);
    Case c;
    c.family = family;
    expect_bitwise_equal(run_resident(c), run_offload(c));
  }
}

TEST(Offload, SynchronousWithEightBitStatesAndDelaysEqualsResident) {
  Case c;
  c.eight_bit = true;
  c.offload.max_optimizer_delay_us = 300;
  c.device.max_copy_delay_us = 300;
  expect_bitwise_equal(run_resident(c), run_offload(c));
}

TEST(Offload, ReportsTheBytesItCopies) {
  Case c;
  c.steps = 1;
  const RunResult r = run_offload(c);
  const int64_t weights = load_family("llama").config().num_parameters() * 4;
  // The stand-in computes in f32: every gradient down, every weight up.
  EXPECT_EQ(r.stats[0].d2h_bytes, weights);
  EXPECT_EQ(r.stats[0].h2d_bytes, weights);
}

// Every column on the device and a window of one step: ZenFlow's device
// AdamW does the whole update, as resident's would.
TEST(ZenFlow, AllColumnsOnTheDeviceEqualsResidentBitwise) {
  for (const char* family : {"llama", "qwen3", "gpt2"}) {
    for (bool overlap : {true, false}) {
      SCOPED_TRACE(std::string(family) + (overlap ? " overlap" : " no overlap"));
      Case c;
      c.family = family;
      c.offload.zenflow = true;
      c.offload.zenflow_options.topk_ratio = 1.0;
      c.offload.zenflow_options.update_interval = 1;
      c.offload.zenflow_options.overlap_step = overlap;
      expect_bitwise_equal(run_resident(c), run_offload(c));
    }
  }
}

// Warm-up steps run the synchronous offload (resident's arithmetic); the
// first ZenFlow step after them is a selection, whose device moments start
// at zero (as at every reselection), so from then on the run is not
// resident's.
TEST(ZenFlow, WarmUpRoundsRunTheSynchronousOffloadThenSelect) {
  Case c;
  c.steps = 5;
  c.offload.zenflow = true;
  c.offload.zenflow_options.topk_ratio = 1.0;
  c.offload.zenflow_options.update_interval = 1;
  c.offload.zenflow_options.full_warm_up_rounds = 2;
  const RunResult ref = run_resident(c), got = run_offload(c);
  // Step s's loss is computed on the weights after s updates.
  for (size_t s = 0; s <= 2; ++s) EXPECT_EQ(ref.stats[s].loss, got.stats[s].loss) << "step " << s;
  EXPECT_EQ(got.stats[1].d2h_bytes > 0, true) << "warm-up copies every gradient to the host";
  EXPECT_EQ(got.stats[3].d2h_bytes, 0) << "every column is on the device after warm-up";
  EXPECT_NE(ref.stats[4].loss, got.stats[4].loss) << "the device moments restarted at step 2";
}

Case partial_zenflow() {
  Case c;
  c.steps = 7;
  c.offload.zenflow = true;
  c.offload.zenflow_options.topk_ratio = 0.25;
  c.offload.zenflow_options.update_interval = 2;
  c.offload.zenflow_options.select_strategy = SelectStrategy::Step;
  c.offload.zenflow_options.select_interval = 4;
  return c;
}

// The asynchronous path (CPU updates beside the next window, merged one
// window late) gives the same bits whatever the timing of its threads.
TEST(ZenFlow, AsynchronousUpdatesAreDeterministicUnderInjectedDelays) {
  const Case base = partial_zenflow();
  const RunResult ref = run_offload(base);
  Case delayed = base;
  delayed.offload.max_optimizer_delay_us = 2000;
  delayed.device.max_copy_delay_us = 500;
  const RunResult got = run_offload(delayed);
  ASSERT_EQ(ref.stats.size(), got.stats.size());
  for (size_t s = 0; s < ref.stats.size(); ++s) {
    EXPECT_EQ(ref.stats[s].loss, got.stats[s].loss) << "step " << s;
    EXPECT_EQ(ref.stats[s].grad_norm, got.stats[s].grad_norm) << "step " << s;
  }
  for (size_t i = 0; i < ref.params.size(); ++i)
    EXPECT_EQ(ref.params[i], got.params[i]) << "parameter " << i;
}

// Note [ZenFlow's early download]: taking a window's gradients as they
// become final in its last backward, and waiting for them only before the
// next backward, gives the bits of taking them after the backward, with or
// without overlap, for both optimizers, whatever the copy engine's timing.
// With overlap, the windows ending at steps 3 and 5 also merge the CPU
// update of the window before as gradients become final (Note [ZenFlow's
// early merge]): the same bits and the same bytes uploaded.
TEST(ZenFlow, EarlyDownloadGivesTheBitsOfTheLateOne) {
  for (bool overlap : {true, false}) {
    for (bool eight_bit : {false, true}) {
      SCOPED_TRACE(std::string(overlap ? "overlap" : "no overlap") +
                   (eight_bit ? ", adamw8bit" : ", adamw"));
      Case late = partial_zenflow();
      late.eight_bit = eight_bit;
      late.offload.zenflow_options.overlap_step = overlap;
      late.offload.early_download = false;
      Case early = late;
      early.offload.early_download = true;
      early.device.max_copy_delay_us = 300;
      const RunResult ref = run_offload(late), got = run_offload(early);
      ASSERT_EQ(ref.stats.size(), got.stats.size());
      for (size_t s = 0; s < ref.stats.size(); ++s) {
        EXPECT_EQ(ref.stats[s].loss, got.stats[s].loss) << "step " << s;
        EXPECT_EQ(ref.stats[s].grad_norm, got.stats[s].grad_norm) << "step " << s;
        EXPECT_EQ(ref.stats[s].d2h_bytes, got.stats[s].d2h_bytes) << "step " << s;
        EXPECT_EQ(ref.stats[s].h2d_bytes, got.stats[s].h2d_bytes) << "step " << s;
      }
      for (size_t i = 0; i < ref.params.size(); ++i)
        EXPECT_EQ(ref.params[i], got.params[i]) << "parameter " << i;
      // Windows of update_interval 2 end at steps 1, 3 and 5 (the last,
      // open at step 6, is ended by sync_masters outside any step).
      for (size_t s = 0; s < got.stats.size(); ++s)
        EXPECT_EQ(got.stats[s].zenflow_window_steps, s % 2 == 1 ? 2 : 0) << "step " << s;
    }
  }
}

// With a share of the columns, ZenFlow is not resident, but it trains: the
// CPU's windows reach the weights (a run whose CPU updates never landed
// would leave those columns at their start), and the loss moves.
TEST(ZenFlow, PartialColumnsMoveEveryWeight) {
  const Case c = partial_zenflow();
  const RunResult got = run_offload(c);
  const models::CausalLM start = load_family(c.family);
  const auto params = start.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<float> before = params[i].second.to_vector<float>();
    size_t moved = 0;
    for (size_t j = 0; j < before.size(); ++j) moved += before[j] != got.params[i][j];
    EXPECT_GT(moved, before.size() * 9 / 10)
        << params[i].first << ": " << moved << " of " << before.size() << " elements moved";
  }
  for (const StepStats& s : got.stats) {
    EXPECT_TRUE(std::isfinite(s.loss));
    EXPECT_GT(s.grad_norm, 0);
  }
}

}  // namespace
}  // namespace lt::exec
