// The streaming executor against the resident executor (the reference), on
// the CPU stand-in device: same per-step losses, gradient norms and final
// parameters over several steps, for every family and many schedules.
//
// Where the two do the same arithmetic in the same order the results are
// bitwise equal. Three places differ, and there the check is a tolerance:
//  - the gradient norm: resident sums the squares of all gradients in one
//    run of fixed 64K-element chunks; streaming sums each stage's chunks as
//    the stage lands and adds the stage sums in chain order. The double sums
//    differ in the last bits (checked to 1e-12); the clip factor is rounded
//    to f32 before AdamW uses it, so parameters still match bit for bit.
//  - tied embeddings (qwen2, qwen3, gpt2) with several micro-batches:
//    resident adds, per micro-batch, head + embedding contributions and then
//    accumulates ((h0 + e0) + (h1 + e1)); streaming runs the head for every
//    micro-batch first, ((h0 + h1) + e0) + e1. Float addition is not
//    associative, so the embedding gradient differs in the last bits.
//  - chunks (Schedule::chunk_sequences) smaller than the trainer's micro-batch: a
//    weight gradient that one GEMM summed over all rows is summed as two
//    partial GEMMs, and the loss as two partial sums.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/random.h"
#include "exec/memory_budget.h"
#include "exec/resident.h"
#include "exec/streaming.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "support/errors.h"
#include "support/executor_steps.h"
#include "support/random_batch.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& family) {
  return fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families" / family;
}

// The fixture itself (layers == 0), or a fresh model of its shape with more
// blocks (for schedules with many boundaries); the same seed gives the same
// weights, so the two executors start from identical models.
models::CausalLM make_model(const std::string& family, int layers) {
  if (layers == 0) return io::load_hf_model(fixture(family));
  models::ModelConfig config = models::ModelConfig::from_file(fixture(family) / "config.json");
  config.num_hidden_layers = layers;
  Generator gen(11);
  return models::CausalLM::random(config, gen);
}

enum class OptimizerKind { AdamW, AdamW8bit };

std::unique_ptr<optim::Optimizer> make_optimizer(const models::CausalLM& model,
                                                 OptimizerKind kind) {
  optim::AdamWOptions o;
  o.lr = 3e-3;
  o.weight_decay = 0.01;
  if (kind == OptimizerKind::AdamW8bit) {
    optim::AdamW8bitOptions o8;
    o8.min_8bit_numel = 512;  // most fixture tensors take the 8-bit path
    o8.block_size = 256;
    return std::make_unique<optim::AdamW8bit>(model.parameters(), o,
                                              std::vector<std::string>{"norm"}, o8);
  }
  return std::make_unique<optim::AdamW>(model.parameters(), o, std::vector<std::string>{"norm"});
}

// `steps` global batches of `micro` micro-batches of `rows` x ~`seq` tokens;
// micro-batches alternate in length, and some targets are masked.
// `unpredicted_row`: a row of every micro-batch with no target (-1: none).
std::vector<std::vector<data::Batch>> make_batches(int steps, int micro, int64_t rows, int64_t seq,
                                                   int64_t vocab, uint64_t seed,
                                                   int64_t unpredicted_row = -1) {
  Generator gen(seed);
  std::vector<std::vector<data::Batch>> out(static_cast<size_t>(steps));
  for (auto& step : out) {
    for (int m = 0; m < micro; ++m) {
      const int64_t t = seq + (m % 2) * 3;
      data::Batch b = lt::testing::random_token_batch(gen, rows, t, vocab, {0, 1});
      if (unpredicted_row >= 0) {
        for (int64_t i = 0; i < t; ++i) b.targets.data<int64_t>()[unpredicted_row * t + i] = -100;
        b.target_count = models::count_targets(b.targets);
      }
      step.push_back(std::move(b));
    }
  }
  return out;
}

using RunResult = lt::testing::ExecutorRun;

RunResult run_steps(Executor& executor, const models::CausalLM& model,
                    const std::vector<std::vector<data::Batch>>& batches, double max_grad_norm) {
  return lt::testing::run_executor_steps(executor, model, batches, max_grad_norm);
}

struct Case {
  std::string family = "llama";
  int layers = 0;     // 0: the fixture's own
  Schedule schedule;  // empty: all on the device
  int micro = 2;
  int64_t rows = 2;
  OptimizerKind optimizer = OptimizerKind::AdamW;
  double max_grad_norm = 0.05;  // small enough that every step clips
  bool bitwise = true;
  StandInOptions device;
  int64_t max_optimizer_delay_us = 0;
  int steps = 3;
  int64_t unpredicted_row = -1;   // make_batches'
  double param_tolerance = 5e-6;  // when not bitwise
};

// Runs resident and streaming on identical models and data; returns the
// streaming run's stats for further checks.
std::vector<StepStats> expect_same_as_resident(const Case& c) {
  models::CausalLM ref_model = make_model(c.family, c.layers);
  models::CausalLM model = make_model(c.family, c.layers);
  auto ref_opt = make_optimizer(ref_model, c.optimizer);
  auto opt = make_optimizer(model, c.optimizer);
  const auto batches =
      make_batches(c.steps, c.micro, c.rows, 7, model.config().vocab_size, 5, c.unpredicted_row);
  ResidentExecutor resident(ref_model, *ref_opt);
  RunResult ref = run_steps(resident, ref_model, batches, c.max_grad_norm);
  StreamingOptions so;
  so.schedule = c.schedule;
  so.max_optimizer_delay_us = c.max_optimizer_delay_us;
  StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(c.device), so);
  RunResult got = run_steps(streaming, model, batches, c.max_grad_norm);

  for (size_t s = 0; s < ref.stats.size(); ++s) {
    const double l0 = ref.stats[s].loss, l1 = got.stats[s].loss;
    if (c.bitwise) {
      EXPECT_EQ(l0, l1) << "step " << s << " loss";
    } else {
      EXPECT_LE(std::abs(l0 - l1), 1e-6 * std::abs(l0)) << "step " << s << " loss";
    }
    const double n0 = ref.stats[s].grad_norm, n1 = got.stats[s].grad_norm;
    EXPECT_LE(std::abs(n0 - n1), (c.bitwise ? 1e-12 : 1e-6) * n0) << "step " << s << " grad_norm";
    EXPECT_GT(n0, c.max_grad_norm) << "step " << s << ": clipping should be active";
    EXPECT_EQ(ref.stats[s].tokens, got.stats[s].tokens);
    EXPECT_FALSE(got.stats[s].skipped);
  }
  EXPECT_NE(ref.stats.front().loss, ref.stats.back().loss) << "the updates should move the loss";
  const auto names = model.parameters();
  for (size_t i = 0; i < ref.params.size(); ++i) {
    const auto& a = ref.params[i];
    const auto& b = got.params[i];
    EXPECT_EQ(a.size(), b.size());
    if (a.size() != b.size()) continue;
    if (c.bitwise) {
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << names[i].first << " differs from resident";
    } else {
      double worst = 0;
      for (size_t j = 0; j < a.size(); ++j) worst = std::max(worst, std::abs(double{a[j]} - b[j]));
      // AdamW divides each gradient by its own running RMS, so relative
      // rounding differences in a gradient become differences in the update
      // itself. The key bias's gradient is zero in exact arithmetic (softmax
      // ignores a shift shared by all keys): it is rounding noise, and its
      // update is noise of up to lr per step.
      const bool noise_gradient = names[i].first.find("k_proj.bias") != std::string::npos;
      EXPECT_LE(worst, noise_gradient ? 1e-4 : c.param_tolerance) << names[i].first;
    }
  }
  return got.stats;
}

Schedule placements(std::initializer_list<Placement> list) {
  Schedule s;
  s.boundaries = list;
  return s;
}

constexpr Placement G = Placement::Gpu, H = Placement::Host, R = Placement::Recompute;

TEST(Streaming, EveryFamilyOneMicroBatchBitwise) {
  for (const char* family : {"llama", "mistral", "qwen2", "qwen3", "gpt2"}) {
    SCOPED_TRACE(family);
    Case c;
    c.family = family;
    c.micro = 1;
    expect_same_as_resident(c);
  }
}

TEST(Streaming, EveryFamilyAccumulating) {
  for (const char* family : {"llama", "mistral", "qwen2", "qwen3", "gpt2"}) {
    SCOPED_TRACE(family);
    Case c;
    c.family = family;
    c.micro = 3;
    // Untied: bitwise. Tied: the embedding gradient's order of additions
    // differs (see the top of this file).
    c.bitwise = std::string(family) == "llama" || std::string(family) == "mistral";
    c.schedule = Schedule::every_kth_gpu(2, 2);
    expect_same_as_resident(c);
  }
}

TEST(Streaming, SchedulesOnADeeperModel) {
  const int L = 7;
  std::vector<std::pair<std::string, Schedule>> schedules = {
      {"all_gpu", Schedule::all_gpu(L)},
      {"every 2nd", Schedule::every_kth_gpu(L, 2)},
      {"every 3rd", Schedule::every_kth_gpu(L, 3)},
      {"all recompute but boundary 0", Schedule::every_kth_gpu(L, 100)},
      {"all recompute, even boundary 0", placements({R, R, R, R, R, R, R, R})},
      {"host mix", placements({H, R, G, H, R, R, H, G})},
      {"all host", placements({H, H, H, H, H, H, H, H})},
  };
  for (const auto& [label, schedule] : schedules) {
    SCOPED_TRACE(label);
    Case c;
    c.layers = L;
    c.schedule = schedule;
    expect_same_as_resident(c);
  }
}

TEST(Streaming, AdamW8bit) {
  Case c;
  c.layers = 4;
  c.optimizer = OptimizerKind::AdamW8bit;
  c.schedule = placements({G, R, H, R, G});
  expect_same_as_resident(c);
}

// Note [Stages on the device]: stages kept whole in device memory (the
// stand-in's) and updated there give the resident run's losses and weights
// bit for bit, whichever stages they are; a tied head on the device reads
// the embedding's device copy.
TEST(Streaming, StagesOnTheDeviceAsResident) {
  const int L = 3;  // stages 0 (embed), 1..3 (blocks), 4 (head)
  for (const char* family : {"llama", "qwen2", "gpt2"}) {
    const bool tied = std::string(family) != "llama";
    std::vector<std::vector<int>> lists = {{0}, {0, 1}, {2}, {0, 4}, {0, 1, 2, 3, 4}};
    if (!tied) lists.push_back({4});
    for (const auto& list : lists) {
      SCOPED_TRACE(std::string(family) + " " + ::testing::PrintToString(list));
      Case c;
      c.family = family;
      c.layers = L;
      c.micro = 1;
      c.schedule = Schedule::every_kth_gpu(L, 2);
      c.schedule.stages_on_device = list;
      c.max_optimizer_delay_us = list.size() == 2 ? 300 : 0;
      expect_same_as_resident(c);
    }
  }
  // Gradients accumulated over micro-batches on the device, and 8-bit states.
  Case c;
  c.layers = L;
  c.micro = 3;
  c.schedule = Schedule::every_kth_gpu(L, 2);
  c.schedule.stages_on_device = {0, 1, 3};
  expect_same_as_resident(c);
  c.micro = 1;
  c.optimizer = OptimizerKind::AdamW8bit;
  expect_same_as_resident(c);
}

// Note [The fused tail]: the last blocks (one, two, all) and the head as
// one use, chunk by chunk, give the resident run's losses and weights bit
// for bit, whatever else the schedule does: recomputed boundaries (the one
// entering the tail too), chunks, the tail's first or a later block or the
// head kept on the device, a tied head, a model of one block, 8-bit states.
TEST(Streaming, FusedTailAsResident) {
  struct Variant {
    std::string label;
    int layers;
    Schedule schedule;
    int micro = 1;
  };
  std::vector<Variant> variants = {
      {"all gpu", 3, Schedule::all_gpu(3)},
      {"every 2nd", 3, Schedule::every_kth_gpu(3, 2)},
      {"all recompute", 3, placements({R, R, R, R})},
      {"one block", 1, Schedule::all_gpu(1)},
      {"chunks of 2 of 6", 3, Schedule::every_kth_gpu(3, 2), 3},
  };
  Schedule with_block = Schedule::every_kth_gpu(3, 2);
  with_block.stages_on_device = {3};
  variants.push_back({"block 2 on the device", 3, with_block});
  with_block.stages_on_device = {2};
  variants.push_back({"block 1 on the device", 3, with_block});
  Schedule with_embed_and_head = Schedule::all_gpu(3);
  with_embed_and_head.stages_on_device = {0, 4};
  variants.push_back({"embed and head on the device", 3, with_embed_and_head});
  for (const char* family : {"llama", "qwen2", "gpt2"}) {
    for (const Variant& v : variants) {
      for (int tail = 1; tail <= v.layers; ++tail) {
        SCOPED_TRACE(std::string(family) + ", " + v.label + ", tail of " + std::to_string(tail));
        Case c;
        c.family = family;
        c.layers = v.layers;
        c.micro = v.micro;
        c.schedule = v.schedule;
        c.schedule.tail_blocks = tail;
        // Tied heads over several chunks add the embedding gradient in
        // another order (the top of this file).
        c.bitwise = v.micro == 1 || std::string(family) == "llama";
        const std::vector<StepStats> stats = expect_same_as_resident(c);
        for (const StepStats& st : stats) EXPECT_GT(st.compute_s, 0);
      }
    }
  }
  Case c;
  c.layers = 3;
  c.optimizer = OptimizerKind::AdamW8bit;
  c.schedule = Schedule::every_kth_gpu(3, 2);
  c.schedule.tail_blocks = 2;
  expect_same_as_resident(c);
  // Updates that finish late: the tail's later blocks are still being
  // updated when it starts, and each is used only once its update is done.
  c.optimizer = OptimizerKind::AdamW;
  c.schedule = Schedule::all_gpu(3);
  c.schedule.tail_blocks = 3;
  c.max_optimizer_delay_us = 3000;
  c.device.max_copy_delay_us = 1000;
  expect_same_as_resident(c);
}

// Note [The tail's own chunks]: the tail runs each chunk of 4 sequences in
// pieces of 1, 2 or 3 (3 + 1), and trains as resident does in micro-batches
// of 4, within rounding: its pieces' losses and weight gradients are summed
// in another order, and AdamW's first updates are ~lr * g / |g|, so the
// relative rounding of a small gradient moves a weight by up to ~1e-5 of lr
// 3e-3 after 3 steps (GPT-2's tied embedding, which gathers the most sums,
// measured 9.6e-6; a wrong row or target would move it by ~lr). A row
// without targets makes a piece with none.
TEST(Streaming, TailInPiecesOfItsOwnTrainsAsResident) {
  for (const char* family : {"llama", "qwen2", "gpt2"}) {
    for (int tail = 1; tail <= 3; ++tail) {
      for (int64_t piece : {1, 2, 3}) {
        SCOPED_TRACE(std::string(family) + ", tail of " + std::to_string(tail) + " in pieces of " +
                     std::to_string(piece));
        Case c;
        c.family = family;
        c.layers = 3;
        c.rows = 4;
        c.unpredicted_row = 1;
        c.schedule = Schedule::every_kth_gpu(3, 2);
        c.schedule.tail_blocks = tail;
        c.schedule.tail_chunk_sequences = piece;
        c.bitwise = false;
        c.param_tolerance = 2e-5;
        expect_same_as_resident(c);
      }
    }
  }
  // Chunks of 2 of micro-batches of 4, the tail in pieces of 1, the head on
  // the device.
  Case c;
  c.layers = 3;
  c.rows = 4;
  c.schedule = Schedule::all_gpu(3);
  c.schedule.chunk_sequences = 2;
  c.schedule.tail_blocks = 2;
  c.schedule.tail_chunk_sequences = 1;
  c.schedule.stages_on_device = {4};
  c.bitwise = false;
  c.param_tolerance = 2e-5;
  expect_same_as_resident(c);
}

TEST(Streaming, FusedTailRefusesOffloadedBoundaries) {
  Schedule s = placements({G, H, G, G});
  s.tail_blocks = 1;
  models::CausalLM model = make_model("llama", 3);
  auto opt = make_optimizer(model, OptimizerKind::AdamW);
  StreamingOptions so;
  so.schedule = s;
  const std::string message = testing::error_of([&] {
    StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}), so);
  });
  EXPECT_NE(message.find("fused_tail needs every boundary on the GPU or recomputed; boundaries[1] "
                         "is host"),
            std::string::npos)
      << message;
}

// Between steps a stage on the device is back in host memory (sync(): a
// checkpoint or an evaluation reads host tensors), with the resident
// run's values, and the next step takes it to the device again.
TEST(Streaming, StagesOnTheDeviceAreInHostMemoryAfterEverySync) {
  models::CausalLM ref_model = make_model("llama", 3);
  models::CausalLM model = make_model("llama", 3);
  auto ref_opt = make_optimizer(ref_model, OptimizerKind::AdamW);
  auto opt = make_optimizer(model, OptimizerKind::AdamW);
  const auto batches = make_batches(3, 1, 2, 7, model.config().vocab_size, 5);
  ResidentExecutor resident(ref_model, *ref_opt);
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(3);
  so.schedule.stages_on_device = {0, 1, 4};
  StandInOptions device_options;
  StandInDevice device(device_options);
  StreamingExecutor streaming(model, *opt, device, so);
  for (size_t s = 0; s < batches.size(); ++s) {
    StepOptions o;
    o.lr = 3e-3;
    o.max_grad_norm = 0.05;
    const StepStats want = resident.step(batches[s], o);
    const int64_t before = device.memory().stats().current_bytes;
    const StepStats got = streaming.step(batches[s], o);
    EXPECT_EQ(want.loss, got.loss) << "step " << s;
    EXPECT_GT(device.memory().stats().peak_bytes, before) << "nothing went to the device";
    streaming.sync();
    resident.sync();
    const auto ref_params = ref_model.parameters();
    const auto params = model.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_TRUE(params[i].second.device().is_cpu()) << params[i].first;
      EXPECT_EQ(ref_params[i].second.to_vector<float>(), params[i].second.to_vector<float>())
          << "step " << s << " " << params[i].first;
    }
    const auto ref_state = ref_opt->state();
    const auto state = opt->state();
    ASSERT_EQ(ref_state.size(), state.size());
    for (size_t k = 0; k < state.size(); ++k) {
      ASSERT_TRUE(state[k].second.device().is_cpu()) << state[k].first;
      if (state[k].second.dtype() != DType::F32) continue;
      EXPECT_EQ(ref_state[k].second.to_vector<float>(), state[k].second.to_vector<float>())
          << "step " << s << " " << state[k].first;
    }
  }
}

// Device memory that runs out while the stages move in: the error says
// which parameter and how to stream every stage, and every master and
// state is back in host memory with its values, so nothing is lost.
TEST(Streaming, StagesThatDoNotFitTheDeviceLeaveEverythingOnTheHost) {
  models::CausalLM model = make_model("llama", 3);
  auto opt = make_optimizer(model, OptimizerKind::AdamW);
  const auto before = model.parameters();
  std::vector<std::vector<float>> values;
  for (const auto& [name, p] : before) values.push_back(p.to_vector<float>());
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(3);
  so.schedule.stages_on_device = {0, 1, 2, 3, 4};
  StandInOptions tiny;
  tiny.capacity_bytes = 40000;  // the embedding's master and states, not the rest
  StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(tiny), so);
  const auto batches = make_batches(1, 1, 2, 7, model.config().vocab_size, 5);
  StepOptions o;
  o.lr = 1e-3;
  const std::string message = testing::error_of([&] { streaming.step(batches[0], o); });
  EXPECT_NE(message.find("moving the stages of stages_on_device into device memory failed at"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("exec.stages_on_device: none"), std::string::npos) << message;
  const auto after = model.parameters();
  for (size_t i = 0; i < after.size(); ++i) {
    ASSERT_TRUE(after[i].second.device().is_cpu()) << after[i].first;
    EXPECT_EQ(after[i].second.to_vector<float>(), values[i]) << after[i].first;
  }
  for (const auto& [name, t] : opt->state()) {
    EXPECT_TRUE(!t.storage() || t.device().is_cpu()) << name;
  }
}

TEST(Streaming, StagesOnTheDeviceRefuseWhatTheyCannotRun) {
  models::CausalLM model = make_model("qwen2", 3);  // tied
  auto opt = make_optimizer(model, OptimizerKind::AdamW);
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(3);
  so.schedule.stages_on_device = {4};  // the tied head without the embedding
  EXPECT_NE(testing::error_of([&] {
              StreamingExecutor(model, *opt, std::make_unique<StandInDevice>(), so);
            }).find("add stage 0"),
            std::string::npos);
}

TEST(Streaming, MicroBatchChunksWithinTolerance) {
  Case c;
  c.layers = 4;
  c.rows = 4;
  c.schedule = Schedule::every_kth_gpu(4, 2);
  c.schedule.chunk_sequences = 1;  // each 4-row micro-batch goes through in 4 pieces
  c.bitwise = false;
  expect_same_as_resident(c);
}

TEST(Streaming, NoClippingAndNoOverlap) {
  // Without overlap every step ends with its update done; results are the
  // same either way.
  models::CausalLM ref_model = make_model("llama", 3);
  models::CausalLM model = make_model("llama", 3);
  auto ref_opt = make_optimizer(ref_model, OptimizerKind::AdamW);
  auto opt = make_optimizer(model, OptimizerKind::AdamW);
  const auto batches = make_batches(3, 2, 2, 6, 97, 9);
  ResidentExecutor resident(ref_model, *ref_opt);
  RunResult ref = run_steps(resident, ref_model, batches, 0);
  StreamingOptions so;
  so.overlap_optimizer = false;
  so.schedule = Schedule::every_kth_gpu(3, 2);
  StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(), so);
  RunResult got = run_steps(streaming, model, batches, 0);
  for (size_t s = 0; s < 3; ++s) EXPECT_EQ(ref.stats[s].loss, got.stats[s].loss);
  for (size_t i = 0; i < ref.params.size(); ++i) EXPECT_EQ(ref.params[i], got.params[i]);
}

// StepStats::cpu_update_*: each step's forward takes every stage the CPU
// updated after the previous step (none before the first), so from the
// second step on the parameters counted are those of the stages the CPU
// updates (not the stages on the device), with a fused tail too.
TEST(Streaming, CountsTheCpuUpdatesTheForwardTakes) {
  for (const int tail : {0, 2})
    for (const std::vector<int>& on_device : {std::vector<int>{}, std::vector<int>{0, 1}}) {
      SCOPED_TRACE(::testing::Message() << on_device.size() << " on the device, tail " << tail);
      models::CausalLM model = make_model("llama", 3);
      auto opt = make_optimizer(model, OptimizerKind::AdamW);
      StreamingOptions so;
      so.schedule = Schedule::every_kth_gpu(3, 1);
      so.schedule.stages_on_device = on_device;
      so.schedule.tail_blocks = tail;
      StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(), so);
      const RunResult got = run_steps(streaming, model, make_batches(3, 2, 2, 6, 97, 9), 0.05);
      int64_t expected = 0;
      for (size_t s = 0; s < model.stages().size(); ++s) {
        if (std::find(on_device.begin(), on_device.end(), static_cast<int>(s)) != on_device.end())
          continue;
        nn::NamedParameters own;  // a tied head's matrix is the embed stage's alone
        model.stages()[s]->collect(own);
        for (const auto& [name, p] : own) expected += p.numel();
      }
      EXPECT_EQ(got.stats[0].cpu_update_parameters, 0);
      EXPECT_EQ(got.stats[0].cpu_update_s, 0);
      for (size_t step = 1; step < got.stats.size(); ++step) {
        EXPECT_EQ(got.stats[step].cpu_update_parameters, expected) << step;
        EXPECT_GT(got.stats[step].cpu_update_s, 0) << step;
      }
    }
}

TEST(Streaming, RandomCopyDelaysDoNotChangeResults) {
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(seed);
    Case c;
    c.layers = 5;
    c.schedule = placements({H, R, G, H, R, H});
    c.device.max_copy_delay_us = 400;
    c.device.delay_seed = seed;
    c.max_optimizer_delay_us = 2000;  // updates late: each forward must wait for its own
    c.steps = 3;
    expect_same_as_resident(c);
  }
}

int64_t parameter_bytes(const models::CausalLM& model) {
  int64_t n = 0;
  for (const auto& [name, p] : model.parameters()) n += static_cast<int64_t>(p.nbytes());
  return n;
}

// The device's capacity is exactly what exec::bytes_needed budgets for the
// run (f32 on the stand-in), and that is less than the weights alone: the
// resident executor could not even hold them. The executor's peak must stay
// within it whatever the threads' timing: a copy's device tensors are
// released before its ticket completes (WorkQueue; tested in
// streaming_disk_test.cpp), at most two downloads are in flight, and
// bytes_needed counts what the executor holds at its worst point (weight
// slots, a stage's gradients beside two downloading, the boundaries walked
// over its stage plan). Slow engines (the delays) are the other way load
// shows; the capacity is a hard limit.
TEST(Streaming, StreamsWithinADeviceSmallerThanTheModel) {
  const int L = 12;
  const models::CausalLM probe = make_model("llama", L);
  const int64_t model_bytes = parameter_bytes(probe);
  // Each with a fused tail of 6 too (Note [The fused tail]): the blocks'
  // saved tensors for a chunk, beside a block's backward and the head's
  // working sets, and their slots (these tiny blocks' activations outweigh
  // their weights, so that device is not smaller than the model).
  for (auto [delay_us, tail] : {std::pair{0, 0}, {300, 0}, {0, 6}, {300, 6}}) {
    SCOPED_TRACE(std::to_string(delay_us) + " us, tail " + std::to_string(tail));
    Case c;
    c.layers = L;
    c.schedule = Schedule::every_kth_gpu(L, 4);
    c.schedule.tail_blocks = tail;
    // The batches of expect_same_as_resident: c.micro micro-batches of
    // c.rows sequences of at most 7 + 3 tokens, each one chunk.
    Schedule budgeted = c.schedule;
    budgeted.batch_size = c.micro * c.rows;
    budgeted.chunk_sequences = c.rows;
    const TrainSizes sizes{budgeted.batch_size, 10, OptimizerStates::Fp32, 4, {}, {}, 2048, false};
    c.device.capacity_bytes = bytes_needed(probe.config(), sizes, budgeted).bytes(MemorySpace::Gpu);
    if (tail == 0) {
      ASSERT_LT(c.device.capacity_bytes, model_bytes);
    }
    c.device.max_copy_delay_us = delay_us;
    c.max_optimizer_delay_us = delay_us;
    auto stats = expect_same_as_resident(c);
    for (const auto& s : stats) {
      ASSERT_TRUE(s.peak_bytes.count("device"));
      EXPECT_LE(s.peak_bytes.at("device"), c.device.capacity_bytes);
      EXPECT_GT(s.peak_bytes.at("device"), 0);
    }
  }
}

// One step of the llama fixture with a 65536-token vocabulary (the head's
// working set then outweighs a block's), 2 sequences of `seq` tokens in
// chunks of `chunk`, all boundaries on a stand-in device whose capacity is
// exactly what exec::bytes_needed budgets. Returns the budget and the step.
struct HeadRun {
  MemoryBudget budget;
  StepStats stats;
};
HeadRun head_step_at_budget(int64_t seq, int64_t chunk) {
  models::ModelConfig config = models::ModelConfig::from_file(fixture("llama") / "config.json");
  config.vocab_size = 65536;
  config.max_position_embeddings = 512;
  Generator gen(5);
  models::CausalLM model = models::CausalLM::random(config, gen);
  auto opt = make_optimizer(model, OptimizerKind::AdamW);
  const auto batches = make_batches(1, 1, 2, seq, config.vocab_size, 17);
  Schedule schedule = Schedule::all_gpu(static_cast<int>(config.num_hidden_layers));
  schedule.batch_size = 2;
  schedule.chunk_sequences = chunk;
  HeadRun r;
  r.budget =
      bytes_needed(config, {2, seq, OptimizerStates::Fp32, 4, {}, {}, 2048, false}, schedule);
  StandInOptions device;
  device.capacity_bytes = r.budget.bytes(MemorySpace::Gpu);
  StreamingOptions so;
  so.schedule = schedule;
  StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(device), so);
  r.stats = streaming.step(batches[0], {});  // throws "out of memory" past the capacity
  streaming.sync();
  EXPECT_TRUE(std::isfinite(r.stats.loss));
  EXPECT_LE(r.stats.peak_bytes.at("device"), device.capacity_bytes);
  return r;
}

// 512 tokens in one chunk: two loss chunks of 2^24 / 65536 = 256 rows (the
// stand-in's). lm_head_loss must write each chunk's logit gradient over its
// logits (256 x 65536 f32, 64 MiB) and add the chunk's weight gradient into
// its running sum by the GEMM: a separate gradient, or a chunk's weight
// gradient beside the sum, would need more than this budget.
TEST(Streaming, TheHeadStepStaysWithinItsBudget) {
  const HeadRun r = head_step_at_budget(256, 2);
  const auto working_set = std::find_if(r.budget.items.begin(), r.budget.items.end(), [](auto& i) {
    return i.what.rfind("working set", 0) == 0;
  });
  ASSERT_NE(working_set, r.budget.items.end());
  // The head's term: 256 x 65536 x 4 B of logits (their gradient over them),
  // the weight gradient's sum 65536 x 48 x 4 B, plus (3 x 512 + 256) x 48 x
  // 4 B of [tokens x hidden] tensors; a block's is a few MB.
  EXPECT_EQ(working_set->bytes, 256 * 65536 * 4 + 65536 * 48 * 4 + (3 * 512 + 256) * 48 * 4);
}

// Two chunks of one sequence of 32 tokens (one loss chunk each): the
// autograd engine must add the second chunk's lm_head weight gradient
// (65536 x 48 f32, 12.6 MB) into the first's in place; a new sum beside
// both runs out of this budget (a chunk's logits 32 x 65536 f32, 8.4 MB,
// and the weight gradient's sum).
TEST(Streaming, TheHeadsWeightGradientsStayWithinTheBudget) {
  head_step_at_budget(32, 1);
}

TEST(Streaming, OverCapacityIsAClearError) {
  models::CausalLM model = make_model("llama", 2);
  auto opt = make_optimizer(model, OptimizerKind::AdamW);
  StandInOptions tiny;
  tiny.capacity_bytes = 4096;
  StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(tiny), {});
  const auto batches = make_batches(1, 1, 2, 6, 97, 3);
  const std::string message = testing::error_of([&] { streaming.step(batches[0], {}); });
  EXPECT_NE(message.find("out of memory"), std::string::npos) << message;
  EXPECT_NE(message.find("capacity of 4096 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("bytes in use"), std::string::npos) << message;
  // The failed step left no gradient behind and changed no weight.
  models::CausalLM fresh = make_model("llama", 2);
  const auto a = model.parameters(), b = fresh.parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_FALSE(a[i].second.grad().defined());
    EXPECT_EQ(a[i].second.to_vector<float>(), b[i].second.to_vector<float>());
  }
}

TEST(CapacityAllocator, RefusesRequestsOverCapacity) {
  CapacityAllocator memory(1000);
  void* a = memory.allocate(600);
  EXPECT_EQ(memory.stats().current_bytes, 600);
  const std::string message = testing::error_of([&] { memory.allocate(500); });
  EXPECT_NE(message.find("a request of 500 bytes with 600 bytes in use exceeds the capacity of "
                         "1000 bytes"),
            std::string::npos)
      << message;
  void* b = memory.allocate(400);  // exactly full is fine
  EXPECT_EQ(memory.stats().peak_bytes, 1000);
  memory.deallocate(a, 600);
  memory.deallocate(b, 400);
  EXPECT_EQ(memory.stats().current_bytes, 0);
  // It is the device's memory: the host heap does not count it.
  const int64_t host_before = cpu_allocator().stats().current_bytes;
  void* c = memory.allocate(800);
  EXPECT_EQ(cpu_allocator().stats().current_bytes, host_before);
  memory.deallocate(c, 800);
}

TEST(CapacityAllocator, ComputeScopeRoutesNewTensorsToTheDevice) {
  StandInDevice device;
  Tensor outside = Tensor::zeros({16}, DType::F32);
  {
    auto scope = device.compute_scope();
    Tensor inside = Tensor::zeros({16}, DType::F32);
    EXPECT_EQ(device.memory().stats().current_bytes, 64);
    Tensor host = Tensor::empty({16}, DType::F32, cpu_allocator());  // named: stays host
    EXPECT_EQ(device.memory().stats().current_bytes, 64);
  }
  EXPECT_EQ(device.memory().stats().current_bytes, 0);
  Tensor after = Tensor::zeros({16}, DType::F32);
  EXPECT_EQ(device.memory().stats().current_bytes, 0);
}

// Disk placements: tests/exec/streaming_disk_test.cpp.

StreamingOptions traced(Schedule schedule, const fs::path& path, int steps) {
  StreamingOptions so;
  so.schedule = std::move(schedule);
  so.trace_path = path.string();
  so.trace_steps = steps;
  return so;
}

// A run stopped without sync() (killed after its steps) still leaves the
// trace: it is written when step trace_steps + 2 starts, by which time the
// traced steps' updates have run.
TEST(Streaming, TraceIsWrittenOnceItsStepsAreDoneWithoutSync) {
  models::CausalLM model = make_model("llama", 2);
  auto opt = make_optimizer(model, OptimizerKind::AdamW);
  const fs::path path =
      fs::temp_directory_path() / ("lt_trace_early_" + std::to_string(getpid()) + ".json");
  fs::remove(path);
  StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(),
                              traced(placements({G, G, G}), path, 1));
  const auto batches = make_batches(3, 1, 2, 6, 97, 4);
  StepOptions o;
  o.lr = 1e-3;
  streaming.step(batches[0], o);
  streaming.step(batches[1], o);
  EXPECT_FALSE(fs::exists(path));  // step 1's updates may still be running
  streaming.step(batches[2], o);
  ASSERT_TRUE(fs::exists(path));
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  int updates = 0;
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("name").get<std::string>().rfind("update ", 0) == 0) ++updates;
  EXPECT_EQ(updates, static_cast<int>(model.parameters().size()));  // one step, a piece each
  fs::remove(path);
}

TEST(Streaming, TraceShowsEveryEngineForTheFirstSteps) {
  models::CausalLM model = make_model("llama", 3);
  auto opt = make_optimizer(model, OptimizerKind::AdamW);
  const fs::path path =
      fs::temp_directory_path() / ("lt_trace_" + std::to_string(getpid()) + ".json");
  StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(),
                              traced(placements({G, H, R, G}), path, 2));
  const auto batches = make_batches(3, 1, 2, 6, 97, 4);
  StepOptions o;
  o.lr = 1e-3;
  for (const auto& b : batches) streaming.step(b, o);
  streaming.sync();
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  fs::remove(path);
  std::map<int, std::string> tracks;
  std::map<std::string, int> spans;  // "track: name" -> count
  for (const auto& e : trace.at("traceEvents"))
    if (e.at("ph") == "M") tracks[e.at("tid").get<int>()] = e.at("args").at("name");
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    EXPECT_GE(e.at("dur").get<double>(), 0);
    ++spans[tracks.at(e.at("tid").get<int>()) + ": " + e.at("name").get<std::string>()];
  }
  // Two traced steps of the plan: forward of every stage, the head, the
  // recompute of stage 2 (boundary 2 is dropped), backward of every stage;
  // each stage's update a parameter at a time (Note [Updates in pieces]).
  for (const auto& stage : model.stages()) {
    if (stage->kind() == models::StageKind::Head) continue;
    const std::string name = stage->name();
    EXPECT_EQ(spans["compute: forward " + name], 2) << name;
    EXPECT_EQ(spans["compute: backward " + name], 2) << name;
    EXPECT_EQ(spans["d2h: grads " + name], 2) << name;
    nn::NamedParameters own;
    stage->collect(own);
    if (own.size() == 1) {  // one piece: the stage's whole update
      EXPECT_EQ(spans["optimizer: update " + name], 2) << name;
      continue;
    }
    for (const auto& [param, p] : own) EXPECT_EQ(spans["optimizer: update " + param], 2) << param;
  }
  EXPECT_EQ(spans["compute: head head"], 2);
  EXPECT_EQ(spans["compute: recompute block.1"], 2);  // stage 2 = block.1 makes boundary 2
  EXPECT_EQ(spans["d2h: boundary 1"], 2);             // offloaded in forward
  EXPECT_EQ(spans["h2d: boundary 1"], 2);             // and brought back for backward
  EXPECT_GE(spans["h2d: weights embed"], 2);
}

TEST(StreamingPlan, RecomputesEachSegmentOnceFromTheNearestKeptBoundary) {
  // 5 blocks (stages 0 embed, 1..5 blocks, 6 head); boundaries 0..5.
  // Kept: 0 and 3. Backward of stage 5 needs boundary 4 (dropped): recompute
  // stage 4 from boundary 3. Stage 3 needs boundary 2: recompute stages 1, 2
  // from boundary 0, once for both stage 3 and stage 2.
  using W = StageWork;
  const auto uses = plan_stage_uses(placements({G, R, R, H, R, R}), 5);
  const std::vector<StageUse> expected = {
      {0, W::Forward},  {1, W::Forward},  {2, W::Forward},   {3, W::Forward},
      {4, W::Forward},  {5, W::Forward},  {6, W::HeadStep},  {4, W::Recompute},
      {5, W::Backward}, {4, W::Backward}, {1, W::Recompute}, {2, W::Recompute},
      {3, W::Backward}, {2, W::Backward}, {1, W::Backward},  {0, W::Backward}};
  EXPECT_EQ(uses, expected);
}

TEST(StreamingPlan, TheFusedTailRunsTheLastBlockOnceWithTheHead) {
  // 3 blocks (stages 0 embed, 1..3 blocks, 4 head); boundary 2 recomputed.
  // The tail step (stage 3 and the head) reads boundary 2 while the
  // forward's copy is still on hand; block 1's backward (stage 2) needs
  // boundary 1, kept.
  using W = StageWork;
  Schedule s = placements({G, R, R, G});
  s.tail_blocks = 1;
  const StagePlan plan = plan_stage(s, 3);
  const std::vector<StageUse> expected = {{0, W::Forward},  {1, W::Forward},   {2, W::Forward},
                                          {3, W::TailStep}, {1, W::Recompute}, {2, W::Backward},
                                          {1, W::Backward}, {0, W::Backward}};
  EXPECT_EQ(plan.uses, expected);
  // The head loads into a slot of its own from the use before; the tail
  // step loads the next use's block (the recompute of stage 1) into the
  // other block slot. It drops its input and copies out its gradients (the
  // head's, then the block's).
  EXPECT_EQ(plan.tail_load_use, 2);
  EXPECT_EQ(plan.tail_slot_stages, std::vector<int>{4});
  EXPECT_EQ(plan.next_stage[3], 1);
  EXPECT_EQ(plan.after[3].drop, std::vector<int>{2});
  EXPECT_TRUE(plan.after[3].copy_out_gradients);
  for (const StageUse& u : plan.uses) EXPECT_TRUE(u.work != W::HeadStep);
  // On the device at the tail step's end: both stages' weights and gradients.
  const std::vector<UseHolds> holds = device_holds(plan, false);
  const auto has = [&](const std::vector<Hold>& h, Held what, int index) {
    return std::any_of(h.begin(), h.end(),
                       [&](const Hold& x) { return x.what == what && x.index == index; });
  };
  EXPECT_TRUE(has(holds[2].at_start, Held::Weights, 4));
  EXPECT_TRUE(has(holds[3].at_start, Held::Weights, 1));
  EXPECT_TRUE(has(holds[3].at_start, Held::Weights, 3));
  EXPECT_TRUE(has(holds[3].at_start, Held::Weights, 4));
  EXPECT_FALSE(has(holds[4].at_start, Held::Weights, 4)) << "the head's slot is freed";
  EXPECT_TRUE(has(holds[3].at_end, Held::Gradients, 3));
  EXPECT_TRUE(has(holds[3].at_end, Held::Gradients, 4));
  EXPECT_FALSE(has(holds[3].at_end, Held::Boundary, 3)) << "boundary L never exists";
  // The head's gradients are still downloading at the next backward's end
  // (two downloads in flight), the block's too.
  EXPECT_TRUE(has(holds[5].at_start, Held::Gradients, 4));
}

TEST(StreamingPlan, ATailOfSeveralBlocksRunsEachOfThemOnce) {
  // 4 blocks (stages 0 embed, 1..4 blocks, 5 head), a tail of 3: stages 2,
  // 3, 4 and the head. Boundary 0 recomputed: block 0's backward (stage 1)
  // rebuilds it from the token ids first.
  using W = StageWork;
  Schedule s = placements({R, G, G, G, G});
  s.tail_blocks = 3;
  s.stages_on_device = {3};  // a later block of the tail: no slot of its own
  const StagePlan plan = plan_stage(s, 4);
  const std::vector<StageUse> expected = {{0, W::Forward},   {1, W::Forward},  {2, W::TailStep},
                                          {0, W::Recompute}, {1, W::Backward}, {0, W::Backward}};
  EXPECT_EQ(plan.uses, expected);
  EXPECT_EQ(plan.tail_load_use, 1);
  EXPECT_EQ(plan.tail_slot_stages, (std::vector<int>{4, 5}));
  EXPECT_EQ(plan.after[2].drop, std::vector<int>{1});
  const std::vector<UseHolds> holds = device_holds(plan, false);
  const auto count = [&](const std::vector<Hold>& h, Held what, int index) {
    return std::count_if(h.begin(), h.end(),
                         [&](const Hold& x) { return x.what == what && x.index == index; });
  };
  for (int stage : {2, 4, 5}) EXPECT_EQ(count(holds[2].at_start, Held::Weights, stage), 1);
  EXPECT_EQ(count(holds[2].at_start, Held::Weights, 3), 0) << "on the device, not in a slot";
  for (int stage : {2, 3, 4, 5}) EXPECT_EQ(count(holds[2].at_end, Held::Gradients, stage), 1);
  for (int b : {2, 3, 4}) EXPECT_EQ(count(holds[2].at_end, Held::Boundary, b), 0);
  EXPECT_EQ(count(holds[3].at_start, Held::Weights, 4), 0) << "the tail's slots are freed";
  // The streamed stages' gradients go out as one download, still in flight
  // at the next use; stage 3's stay on the device until the step's end.
  for (int stage : {2, 4, 5}) {
    EXPECT_EQ(count(holds[3].at_start, Held::Gradients, stage), 1);
    EXPECT_TRUE(std::any_of(holds[3].at_start.begin(), holds[3].at_start.end(),
                            [&](const Hold& h) { return h.index == stage && h.in_flight; }));
  }
  EXPECT_EQ(count(holds[5].at_end, Held::Gradients, 3), 1);
}

TEST(StreamingPlan, EveryStageRunsBackwardOnceAndRecomputesAtMostOnce) {
  // Brute force over all 3^5 placements (gpu/host/recompute) of 4 blocks.
  const int L = 4;
  for (int code = 0; code < 243; ++code) {
    Schedule s;
    for (int b = 0, x = code; b <= L; ++b, x /= 3)
      s.boundaries.push_back(std::array{G, H, R}[x % 3]);
    const auto uses = plan_stage_uses(s, L);
    std::vector<int> backward(L + 2), recompute(L + 2);
    std::vector<bool> have(L + 1);
    for (int b = 0; b < L; ++b) have[b] = s.boundaries[b] != R;
    for (const auto& u : uses) {
      if (u.work == StageWork::Recompute) {
        ++recompute[u.stage];
        ASSERT_TRUE(u.stage == 0 || have[u.stage - 1]) << "code " << code;
        have[u.stage] = true;
      }
      if (u.work == StageWork::Backward) {
        ++backward[u.stage];
        ASSERT_TRUE(u.stage == 0 || have[u.stage - 1]) << "code " << code << " stage " << u.stage;
      }
    }
    for (int st = 0; st <= L; ++st) {
      EXPECT_EQ(backward[st], 1);
      EXPECT_LE(recompute[st], 1);
      // A stage is recomputed exactly when its output is dropped and needed.
      EXPECT_EQ(recompute[st], st < L && s.boundaries[st] == R ? 1 : 0) << "code " << code;
    }
  }
}

}  // namespace
}  // namespace lt::exec
