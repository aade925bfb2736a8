// Optimizer states and masters made without memory for the stages on disk
// (Note [Stage states on disk], "the start"), made a stage at a time as the
// streaming executor writes them out:
// - the states: AdamW's and AdamW8bit's states_without_memory; the run is
//   the host-placed run bit for bit (losses, weights and every state after
//   sync()), for adamw and adamw8bit, every stage on disk or some. Building
//   the optimizer and the executor then holds less extra host memory than
//   the states of every stage together, which making them all first (as
//   the start did before) holds by itself. A state without memory in a
//   stage that stays in host memory is an error naming it.
// - the masters: CausalLM::random and uninitialized with per-stage flags,
//   filled through StreamingOptions::fill_masters from random init at each
//   stage's place in the generator's sequence (fill_random_stage) or from a
//   safetensors folder (io::HfModelReader::read_stage): the whole model's
//   values bit for bit, the same run, and building it holds less host
//   memory than the masters of every stage together, which loading them
//   all first holds by itself.
#include <gtest/gtest.h>

#include "core/allocator.h"
#include "core/random.h"
#include "exec/memory_budget.h"
#include "exec/staged_states.h"
#include "exec/streaming.h"
#include "io/hf_model.h"
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

models::ModelConfig llama(int layers) {
  models::ModelConfig config =
      models::ModelConfig::from_file(train::testing::fixture("llama") / "config.json");
  config.num_hidden_layers = layers;
  return config;
}

// How a run starts: every master and state in host memory first (Whole),
// the disk stages' states made without memory, or their masters too (from
// random init, or from a safetensors folder of the same values).
enum class Start { Whole, StatesWithoutMemory, StreamedRandom, StreamedSafetensors };

// The llama fixture's random init (seed 23) with `layers` blocks (unless
// the model is there already), its optimizer and executor, the stages
// `on_disk` on disk, started as `start` says, on a stand-in as `device`
// says.
struct Built {
  explicit Built(const TempDir& dir) : dir(dir) {}
  const TempDir& dir;
  std::map<size_t, Generator> starts;
  std::optional<io::HfModelReader> reader;
  std::optional<models::CausalLM> model;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<StreamingExecutor> ex;
};

void build(Built& b, TestOptimizer kind, int layers, const std::vector<bool>& on_disk, Start start,
           const StandInOptions& device = {}) {
  const models::ModelConfig config = llama(layers);
  Generator gen(23);
  if (start == Start::StreamedSafetensors) {
    io::save_hf_model(models::CausalLM::random(config, gen), b.dir.path() / "model", DType::F32);
    b.reader.emplace(b.dir.path() / "model");
    b.model.emplace(models::CausalLM::uninitialized(config, DType::F32, on_disk));
    for (size_t s = 0; s < on_disk.size(); ++s)
      if (!on_disk[s]) b.reader->read_stage(*b.model, s);
  } else if (start == Start::StreamedRandom) {
    b.model.emplace(models::CausalLM::random(config, gen, DType::F32, on_disk, b.starts));
  } else if (!b.model) {
    b.model.emplace(models::CausalLM::random(config, gen));
  }
  b.opt = testing::test_optimizer(
      *b.model, kind,
      start == Start::Whole ? std::vector<bool>{} : flags_per_parameter(*b.model, on_disk));
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(layers);
  so.states_on_disk = on_disk;
  so.disk.directory = b.dir.path().string();
  if (start == Start::StreamedRandom)
    so.fill_masters = [&b](size_t s) { b.model->fill_random_stage(s, b.starts.at(s)); };
  if (start == Start::StreamedSafetensors)
    so.fill_masters = [&b](size_t s) { b.reader->read_stage(*b.model, s); };
  b.ex = std::make_unique<StreamingExecutor>(*b.model, *b.opt,
                                             std::make_unique<StandInDevice>(device), so);
}

struct Trained {
  std::vector<double> losses;
  std::vector<std::vector<unsigned char>> params, states;
};

// Three steps, started as `start` says.
Trained train(TestOptimizer kind, const std::vector<bool>& on_disk, Start start) {
  const TempDir dir("states_made_on_disk");
  Built b(dir);
  build(b, kind, kLayers, on_disk, start);
  Generator gen(9);
  Trained r;
  for (int s = 0; s < 3; ++s) {
    StepOptions o;
    o.lr = 3e-3;
    o.max_grad_norm = 0.05;
    r.losses.push_back(
        b.ex->step({lt::testing::random_token_batch(gen, 2, 9, b.model->config().vocab_size)}, o)
            .loss);
  }
  b.ex->sync();
  for (const auto& [name, p] : b.model->parameters()) r.params.push_back(bytes_of(p));
  for (const auto& [name, t] : b.opt->state()) r.states.push_back(bytes_of(t));
  return r;
}

void expect_same(const Trained& want, const Trained& got) {
  EXPECT_EQ(want.losses, got.losses);
  EXPECT_TRUE(want.params == got.params);
  ASSERT_EQ(want.states.size(), got.states.size());
  for (size_t i = 0; i < want.states.size(); ++i) EXPECT_TRUE(want.states[i] == got.states[i]) << i;
}

const char* name_of(TestOptimizer kind) {
  return kind == TestOptimizer::AdamW ? "adamw" : "adamw8bit";
}

TEST(StatesMadeOnDisk, TrainAsTheHostPlacedRunBitForBit) {
  const size_t stages = kLayers + 2;
  std::vector<bool> some(stages, false);
  some[2] = some[3] = some[5] = some[stages - 1] = true;
  for (TestOptimizer kind : {TestOptimizer::AdamW, TestOptimizer::AdamW8bit}) {
    const Trained want = train(kind, std::vector<bool>(stages, false), Start::Whole);
    EXPECT_NE(want.losses.front(), want.losses.back());
    for (const auto& on_disk : {std::vector<bool>(stages, true), some}) {
      SCOPED_TRACE(std::string(name_of(kind)) +
                   (on_disk == some ? " some stages" : " every stage"));
      expect_same(want, train(kind, on_disk, Start::StatesWithoutMemory));
    }
  }
}

TEST(StreamedMasters, TrainAsTheRunWithEveryMasterInHostMemoryBitForBit) {
  const size_t stages = kLayers + 2;
  std::vector<bool> some(stages, false);
  some[0] = some[3] = some[4] = some[stages - 1] = true;  // the embedding, blocks, the head
  for (TestOptimizer kind : {TestOptimizer::AdamW, TestOptimizer::AdamW8bit}) {
    const Trained want = train(kind, std::vector<bool>(stages, false), Start::Whole);
    for (const auto& on_disk : {std::vector<bool>(stages, true), some}) {
      for (Start start : {Start::StreamedRandom, Start::StreamedSafetensors}) {
        SCOPED_TRACE(std::string(name_of(kind)) +
                     (on_disk == some ? ", some stages" : ", every stage") +
                     (start == Start::StreamedRandom ? ", random" : ", safetensors"));
        expect_same(want, train(kind, on_disk, start));
      }
    }
  }
}

// The extra host memory (cpu_allocator) held at the peak of building the
// run, every stage on disk: from before the model when `with_model`, else
// from after it.
int64_t build_peak(Start start, int layers, bool with_model, const StandInOptions& device) {
  const TempDir dir("states_made_peak");
  Built b(dir);
  int64_t before = cpu_allocator().stats().current_bytes;
  cpu_allocator().reset_peak();
  if (!with_model) {
    Generator gen(23);
    b.model.emplace(models::CausalLM::random(llama(layers), gen));
    before = cpu_allocator().stats().current_bytes;
    cpu_allocator().reset_peak();
  }
  build(b, TestOptimizer::AdamW, layers, std::vector<bool>(layers + 2, true), start, device);
  return cpu_allocator().stats().peak_bytes - before;
}

TEST(StatesMadeOnDisk, BuildingTheRunHoldsLessThanEveryStagesStates) {
  const int64_t all_states = 8 * llama(kLayers).num_parameters();  // m, v
  // Made first, as before: the optimizer alone holds them all.
  EXPECT_GE(build_peak(Start::Whole, kLayers, false, {}), all_states);
  // Made a stage at a time: the stand-in's f32 upload copies and the
  // gradient slabs (4 bytes a parameter each, the masters gone to disk
  // first) and a stage's states.
  EXPECT_LT(build_peak(Start::StatesWithoutMemory, kLayers, false, {}), all_states);
}

TEST(StreamedMasters, BuildingTheRunHoldsLessThanEveryMaster) {
  // 12 blocks: a block's stage is about a thirteenth of the masters. The
  // stand-in's slabs and upload copies counted apart, as a GPU's pinned
  // memory is.
  const models::ModelConfig config = llama(12);
  StandInOptions pinned_apart;
  pinned_apart.separate_host_memory = true;
  const int64_t all_masters = 4 * config.num_parameters();
  int64_t largest_stage = 0;
  for (int s = 0; s < 14; ++s)
    largest_stage = std::max(largest_stage, 4 * stage_parameters(config, s));
  // Loaded whole first, as the start did before: the model alone holds them.
  EXPECT_GE(build_peak(Start::StatesWithoutMemory, 12, true, pinned_apart), all_masters);
  // Streamed: a stage in flight (its masters, states and the masters drawn
  // again) and small things.
  const int64_t peak = build_peak(Start::StreamedRandom, 12, true, pinned_apart);
  EXPECT_LT(peak, all_masters);
  EXPECT_LT(peak, 5 * largest_stage) << "more than a stage's masters and states in flight";
}

TEST(StatesMadeOnDisk, AStateWithoutMemoryInAHostStageIsAnError) {
  const TempDir dir("states_made_error");
  models::CausalLM model = testing::random_fixture_model("llama", kLayers);
  std::vector<bool> on_disk(kLayers + 2, true);
  auto opt =
      testing::test_optimizer(model, TestOptimizer::AdamW, flags_per_parameter(model, on_disk));
  on_disk[1] = false;  // block 0 stays in host memory
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(kLayers);
  so.states_on_disk = on_disk;
  so.disk.directory = dir.path().string();
  const std::string e = testing::error_of([&] {
    StreamingExecutor ex(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}), so);
  });
  EXPECT_NE(e.find("without memory"), std::string::npos) << e;
  EXPECT_NE(e.find("state 'block.0."), std::string::npos) << e;
}

// Gives every parameter of `stage` fresh memory, as the executor does.
void give_memory(const models::Stage& stage) {
  nn::NamedParameters own;
  stage.collect(own);
  for (const auto& [name, p] : own) {
    p.impl()->storage = Tensor::empty(p.shape(), p.dtype()).storage();
    p.impl()->offset = 0;
  }
}

void expect_same_values(const models::CausalLM& want, const models::CausalLM& got) {
  const auto a = want.parameters(), b = got.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first);
    ASSERT_TRUE(b[i].second.storage()) << b[i].first;
    EXPECT_TRUE(bytes_of(a[i].second) == bytes_of(b[i].second)) << a[i].first;
  }
}

models::ModelConfig four_blocks(const std::string& family) {
  models::ModelConfig config =
      models::ModelConfig::from_file(train::testing::fixture(family) / "config.json");
  config.num_hidden_layers = 4;
  return config;
}

// The embedding, a block and the head.
const std::vector<bool> kSomeOfFourBlocks = {true, false, true, false, false, true};

TEST(StreamedMasters, RandomStagesFilledLaterAreTheWholeModelsInitBitForBit) {
  // gpt2: learned positions and a tied head; qwen2: an untied head.
  for (const std::string family : {"llama", "gpt2", "qwen2"}) {
    SCOPED_TRACE(family);
    Generator whole_gen(5), streamed_gen(5);
    const models::CausalLM whole = models::CausalLM::random(four_blocks(family), whole_gen);
    std::map<size_t, Generator> starts;
    const models::CausalLM streamed = models::CausalLM::random(
        four_blocks(family), streamed_gen, DType::F32, kSomeOfFourBlocks, starts);
    // The generator drew what the whole model's init draws.
    EXPECT_EQ(whole_gen.next_u64(), streamed_gen.next_u64());
    EXPECT_EQ(starts.size(), 3u);
    for (size_t s = 0; s < kSomeOfFourBlocks.size(); ++s) {
      nn::NamedParameters own;
      streamed.stages()[s]->collect(own);
      for (const auto& [name, p] : own)
        EXPECT_EQ(p.storage() == nullptr, kSomeOfFourBlocks[s]) << name;
    }
    // Filled in another order than the stages': each from its own start.
    for (size_t s : {size_t{5}, size_t{0}, size_t{2}}) {
      give_memory(*streamed.stages()[s]);
      streamed.fill_random_stage(s, starts.at(s));
    }
    expect_same_values(whole, streamed);
  }
}

TEST(StreamedMasters, SafetensorsStagesReadLaterAreTheWholeLoadBitForBit) {
  // gpt2: transposed Conv1D weights and fused q, k, v; shards of ~4 KB.
  for (const std::string family : {"llama", "gpt2"}) {
    SCOPED_TRACE(family);
    const TempDir dir("streamed_masters_hf");
    Generator gen(7);
    io::HfWriteOptions sharded;
    sharded.max_shard_bytes = 4096;
    io::save_hf_model(models::CausalLM::random(four_blocks(family), gen), dir.path(), DType::F32,
                      sharded);
    ASSERT_TRUE(std::filesystem::exists(dir.path() / io::kHfIndexFile));
    const models::CausalLM whole = io::load_hf_model(dir.path());
    const io::HfModelReader reader(dir.path());
    const models::CausalLM streamed =
        models::CausalLM::uninitialized(reader.config(), DType::F32, kSomeOfFourBlocks);
    reader.check_against(streamed);  // shapes only: the flagged stages have no memory
    for (size_t s = 0; s < kSomeOfFourBlocks.size(); ++s) {
      if (kSomeOfFourBlocks[s]) give_memory(*streamed.stages()[s]);
      reader.read_stage(streamed, s);
    }
    expect_same_values(whole, streamed);
  }
}

}  // namespace
}  // namespace lt::exec
