// exec.state_placement disk (exec/stage_state_file.h, Note [Stage states on
// disk]): the state file round-trips bytes and catches a changed byte; the
// streaming executor with every stage's masters and optimizer states on
// disk gives the resident executor's (adamw) and the host-placed run's
// (adamw8bit) losses, weights and optimizer states bit for bit, with
// io_uring and with the threaded fallback; a changed byte in the scratch
// file stops the run naming the file and the stage; a run resumed from
// saved weights and states continues as the uninterrupted one.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/allocator.h"
#include "core/random.h"
#include "exec/memory_budget.h"
#include "exec/resident.h"
#include "exec/stage_state_file.h"
#include "exec/streaming.h"
#include "support/errors.h"
#include "support/file_size_limit.h"
#include "support/fixture_models.h"
#include "support/random_batch.h"
#include "support/state_files.h"
#include "train/train_helpers.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;

using lt::testing::bytes_of;
using lt::testing::flip_byte;

using train::testing::TempDir;

TEST(StageStateFile, RoundTripsEveryStageOnBothBackends) {
  for (bool force_threads : {false, true}) {
    SCOPED_TRACE(force_threads ? "threads" : "io_uring if available");
    const TempDir dir("states_roundtrip");
    Generator gen(5);
    std::string path;
    {
      StageStateFile::Options o;
      o.directory = dir.path().string();
      o.file.force_threads = force_threads;
      o.file.chunk_bytes = 8192;  // several requests per tensor
      o.file.queue_depth = 3;
      StageStateFile file(o);
      path = file.path();
      // Sizes that are not multiples of the alignment or of a checksum block.
      std::vector<Tensor> a = {Tensor::randn({70001}, gen), Tensor::randn({3}, gen)};
      std::vector<Tensor> b = {Tensor::randn({17, 5}, gen).to(DType::BF16)};
      file.write(0, "embed", {"w", "m"}, a);
      file.write(1, "layer 0", {"x"}, b);
      // A rewrite keeps the region and replaces the bytes.
      const int64_t size = file.file_bytes();
      a[0] = Tensor::randn({70001}, gen);
      file.write(0, "embed", {"w", "m"}, a);
      EXPECT_EQ(size, file.file_bytes());
      std::vector<Tensor> got_a = {Tensor::empty({70001}, DType::F32),
                                   Tensor::empty({3}, DType::F32)};
      std::vector<Tensor> got_b = {Tensor::empty({17, 5}, DType::BF16)};
      file.read(1, "layer 0", {"x"}, got_b);
      file.read(0, "embed", {"w", "m"}, got_a);
      for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(bytes_of(a[k]), bytes_of(got_a[k]));
      EXPECT_EQ(bytes_of(b[0]), bytes_of(got_b[0]));
      EXPECT_TRUE(fs::exists(path));
    }
    EXPECT_FALSE(fs::exists(path));  // scratch: removed with the file object
  }
}

TEST(StageStateFile, AFlippedByteIsAnErrorNamingFileStageAndState) {
  const TempDir dir("states_flip");
  Generator gen(6);
  StageStateFile file({dir.path().string(), {}});
  std::vector<Tensor> t = {Tensor::randn({1000}, gen), Tensor::randn({40000}, gen)};
  file.write(3, "layer 2", {"w", "w.exp_avg"}, t);
  // Byte 100000 of the second tensor: its second checksum block.
  flip_byte(file.path(), file.file_offset(3, 1, 100000));
  std::vector<Tensor> got = {Tensor::empty({1000}, DType::F32), Tensor::empty({40000}, DType::F32)};
  const std::string e = testing::error_of([&] {
    file.read(3, "layer 2", {"w", "w.exp_avg"}, got);
  });
  EXPECT_NE(e.find(file.path()), std::string::npos) << e;
  EXPECT_NE(e.find("stage 'layer 2'"), std::string::npos) << e;
  EXPECT_NE(e.find("'w.exp_avg' fails its checksum in bytes [65536, 131072)"), std::string::npos)
      << e;
  // A stage never written is a clear error too.
  EXPECT_NE(
      testing::error_of([&] { file.read(0, "embed", {"w"}, {got[0]}); }).find("never written"),
      std::string::npos);
}

TEST(StageStateFile, ChecksumSeesEveryByte) {
  std::vector<unsigned char> data(4097);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 7);
  const uint64_t h = block_checksum(data.data(), static_cast<int64_t>(data.size()));
  for (size_t i : {size_t{0}, size_t{7}, size_t{2048}, size_t{4096}}) {
    data[i] ^= 1;
    EXPECT_NE(h, block_checksum(data.data(), static_cast<int64_t>(data.size()))) << i;
    data[i] ^= 1;
  }
  EXPECT_EQ(h, block_checksum(data.data(), static_cast<int64_t>(data.size())));
}

// ---- the streaming executor ----

using testing::TestOptimizer;
constexpr TestOptimizer AdamW = TestOptimizer::AdamW, AdamW8bit = TestOptimizer::AdamW8bit;

models::CausalLM llama(int layers) {
  return testing::random_fixture_model("llama", layers);
}

struct Result {
  std::vector<double> losses;
  std::vector<std::vector<unsigned char>> params, states;
};

// The losses of steps [first, last) of `data`.
std::vector<double> run_steps(Executor& executor, const std::vector<std::vector<data::Batch>>& data,
                              size_t first, size_t last) {
  std::vector<double> losses;
  for (size_t s = first; s < last; ++s) {
    StepOptions o;
    o.lr = 3e-3 * (1.0 + 0.1 * static_cast<double>(s));
    o.max_grad_norm = 0.05;
    losses.push_back(executor.step(data[s], o).loss);
  }
  return losses;
}

// Steps [first, last) of `data`, then sync() and a copy of every weight and
// optimizer state (what a checkpoint saves).
Result train(Executor& executor, const models::CausalLM& model, optim::Optimizer& opt,
             const std::vector<std::vector<data::Batch>>& data, size_t first, size_t last) {
  Result r;
  r.losses = run_steps(executor, data, first, last);
  executor.sync();
  for (const auto& [name, p] : model.parameters()) r.params.push_back(bytes_of(p));
  for (const auto& [name, t] : opt.state()) r.states.push_back(bytes_of(t));
  return r;
}

StreamingOptions streaming_options(int layers, const fs::path& dir, bool force_threads) {
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(layers);
  so.disk.directory = dir.string();
  so.disk.file.force_threads = force_threads;
  so.disk.file.chunk_bytes = 8192;
  so.states_on_disk.assign(static_cast<size_t>(layers) + 2, true);
  so.max_optimizer_delay_us = 300;  // the pipeline must not depend on timing
  return so;
}

// An executor on the stand-in with every stage's states on disk in `dir`.
std::unique_ptr<StreamingExecutor> disk_executor(const models::CausalLM& model,
                                                 optim::Optimizer& opt, int layers,
                                                 const fs::path& dir, bool force_threads) {
  return std::make_unique<StreamingExecutor>(model, opt,
                                             std::make_unique<StandInDevice>(StandInOptions{}),
                                             streaming_options(layers, dir, force_threads));
}

constexpr int kLayers = 3;

Result reference(TestOptimizer kind, const std::vector<std::vector<data::Batch>>& data) {
  models::CausalLM model = llama(kLayers);
  auto opt = testing::test_optimizer(model, kind);
  if (kind == AdamW) {  // the resident executor: masters never leave host memory
    ResidentExecutor resident(model, *opt);
    return train(resident, model, *opt, data, 0, data.size());
  }
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(kLayers);
  StreamingExecutor host(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}), so);
  return train(host, model, *opt, data, 0, data.size());
}

void expect_same(const Result& want, const Result& got) {
  ASSERT_EQ(want.losses.size(), got.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s) EXPECT_EQ(want.losses[s], got.losses[s]) << s;
  ASSERT_EQ(want.params.size(), got.params.size());
  for (size_t i = 0; i < want.params.size(); ++i) EXPECT_TRUE(want.params[i] == got.params[i]) << i;
  ASSERT_EQ(want.states.size(), got.states.size());
  for (size_t i = 0; i < want.states.size(); ++i) EXPECT_TRUE(want.states[i] == got.states[i]) << i;
}

TEST(StreamingStates, DiskGivesTheHostRunBitForBitOnBothBackends) {
  for (TestOptimizer kind : {AdamW, AdamW8bit}) {
    const auto data = lt::testing::state_test_batches(4, llama(kLayers).config().vocab_size);
    const Result want = reference(kind, data);
    EXPECT_NE(want.losses.front(), want.losses.back());
    for (bool force_threads : {false, true}) {
      SCOPED_TRACE(std::string(kind == AdamW ? "adamw " : "adamw8bit ") +
                   (force_threads ? "threads" : "io_uring if available"));
      const TempDir dir("states_bitwise");
      models::CausalLM model = llama(kLayers);
      auto opt = testing::test_optimizer(model, kind);
      Result got;
      {
        auto executor = disk_executor(model, *opt, kLayers, dir.path(), force_threads);
        StreamingExecutor& ex = *executor;
        // sync() in the middle (as for an evaluation) brings every stage back
        // and the next step sends them out again.
        Result first = train(ex, model, *opt, data, 0, 2);
        got = train(ex, model, *opt, data, 2, data.size());
        got.losses.insert(got.losses.begin(), first.losses.begin(), first.losses.end());
        EXPECT_FALSE(fs::is_empty(dir.path()));
      }
      expect_same(want, got);
      EXPECT_TRUE(fs::is_empty(dir.path())) << "the scratch file outlived the executor";
    }
  }
}

// Some stages on disk, the rest in host memory (what exec.state_placement
// auto chooses when only some fit): the disk stages' reads wait behind the
// host stages' updates, and the result is the same bit for bit.
TEST(StreamingStates, SomeStagesOnDiskGiveTheHostRunBitForBit) {
  for (TestOptimizer kind : {AdamW, AdamW8bit}) {
    const auto data = lt::testing::state_test_batches(3, llama(kLayers).config().vocab_size);
    const Result want = reference(kind, data);
    // Stages: embed, blocks 0..2, head. Blocks 1 and 2 and the head on disk
    // (more than the read-ahead), and the embed alone.
    for (const std::vector<bool>& on_disk : {std::vector<bool>{false, false, true, true, false},
                                             {false, true, false, true, true},
                                             {true, false, false, false, false}}) {
      // The threaded fallback for the middle placement (io_uring unavailable).
      const bool force_threads = on_disk[1] && !on_disk[0];
      SCOPED_TRACE(std::string(kind == AdamW ? "adamw" : "adamw8bit") + " disk stages " +
                   std::to_string(std::count(on_disk.begin(), on_disk.end(), true)) +
                   (force_threads ? " threads" : ""));
      const TempDir dir("states_some");
      models::CausalLM model = llama(kLayers);
      auto opt = testing::test_optimizer(model, kind);
      StreamingOptions so = streaming_options(kLayers, dir.path(), force_threads);
      so.states_on_disk = on_disk;
      Result got;
      int64_t file_bytes = 0;
      {
        StreamingExecutor ex(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}), so);
        got.losses = run_steps(ex, data, 0, data.size());
        for (const auto& e : fs::directory_iterator(dir.path())) file_bytes += fs::file_size(e);
      }
      for (const auto& [name, p] : model.parameters()) got.params.push_back(bytes_of(p));
      for (const auto& [name, t] : opt->state()) got.states.push_back(bytes_of(t));
      expect_same(want, got);
      // Only the disk stages' masters went to the file (with adamw, 12 bytes a
      // parameter, each tensor padded to 4 KiB).
      int64_t disk_params = 0;
      for (size_t st = 0; st < on_disk.size(); ++st)
        if (on_disk[st]) disk_params += stage_parameters(model.config(), static_cast<int>(st));
      if (kind == AdamW) {
        EXPECT_GE(file_bytes, disk_params * 12);
        EXPECT_LT(file_bytes, disk_params * 12 + 64 * 4096);
      }
    }
  }
}

TEST(StreamingStates, ResumeFromSavedStatesContinuesAsUninterrupted) {
  const auto data = lt::testing::state_test_batches(4, llama(kLayers).config().vocab_size);
  const Result want = reference(AdamW8bit, data);
  const TempDir dir("states_resume");
  // Two steps, then what a checkpoint keeps: the weights and state().
  std::vector<Tensor> weights;
  optim::NamedTensors states;
  std::vector<double> losses;
  {
    models::CausalLM model = llama(kLayers);
    auto opt = testing::test_optimizer(model, AdamW8bit);
    auto executor = disk_executor(model, *opt, kLayers, dir.path(), false);
    StreamingExecutor& ex = *executor;
    losses = train(ex, model, *opt, data, 0, 2).losses;
    for (const auto& [name, p] : model.parameters()) weights.push_back(p.clone());
    for (const auto& [name, t] : opt->state()) states.emplace_back(name, t.clone());
  }
  // A fresh model, optimizer and executor; the weights are loaded before
  // the executor is built and the states after (a sync() brings them back
  // from disk first), as the trainer does.
  models::CausalLM model = llama(kLayers);
  for (size_t i = 0; i < weights.size(); ++i) model.parameters()[i].second.copy_(weights[i]);
  auto opt = testing::test_optimizer(model, AdamW8bit);
  auto executor = disk_executor(model, *opt, kLayers, dir.path(), false);
  StreamingExecutor& ex = *executor;
  ex.sync();
  opt->load_state(states);
  Result got = train(ex, model, *opt, data, 2, data.size());
  got.losses.insert(got.losses.begin(), losses.begin(), losses.end());
  expect_same(want, got);
}

// AdamW with states on disk, without the optimizer overlap: step() returns
// with every stage written back.
struct UnpipelinedRun {
  explicit UnpipelinedRun(const std::string& name)
      : dir("states_" + name),
        model(llama(kLayers)),
        data(lt::testing::state_test_batches(2, model.config().vocab_size)),
        opt(testing::test_optimizer(model, AdamW)),
        executor(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}),
                 options(dir.path())) {}
  static StreamingOptions options(const fs::path& dir) {
    StreamingOptions so = streaming_options(kLayers, dir, false);
    so.overlap_optimizer = false;
    return so;
  }
  TempDir dir;
  models::CausalLM model;
  std::vector<std::vector<data::Batch>> data;
  std::unique_ptr<optim::Optimizer> opt;
  StreamingExecutor executor;
};

TEST(StreamingStates, AFlippedByteInTheScratchFileStopsTheRun) {
  UnpipelinedRun r("flip_run");
  StreamingExecutor& ex = r.executor;
  const auto& data = r.data;
  ex.step(data[0], {3e-3, 0});
  std::string path;
  for (const auto& e : fs::directory_iterator(r.dir.path())) path = e.path().string();
  ASSERT_FALSE(path.empty());
  // The file's first bytes are the embedding's master (stage 0's region is
  // the first); the next step's update reads them.
  flip_byte(path, 100);
  const std::string e = testing::error_of([&] { ex.step(data[1], {3e-3, 0}); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("checksum"), std::string::npos) << e;
  EXPECT_NE(e.find("stage '" + r.model.stages()[0]->name() + "'"), std::string::npos) << e;
  // And the executor stays stopped.
  EXPECT_NE(testing::error_of([&] {
              ex.step(data[1], {3e-3, 0});
            }).find("checksum"),
            std::string::npos);
}

// Between steps, every master and AdamW state is on disk: bringing them
// back (sync) allocates exactly 4 + 8 bytes per parameter of host memory
// and frees the f32 gradient slabs (4) first, so its peak is 8 over the
// step's; the next step frees the states and allocates the slabs again.
TEST(StreamingStates, StatesOnDiskLeaveHostMemoryBetweenSteps) {
  UnpipelinedRun r("memory");
  r.executor.step(r.data[0], {3e-3, 0});
  const int64_t evicted = cpu_allocator().stats().current_bytes;
  cpu_allocator().reset_peak();
  r.executor.sync();
  const int64_t loaded = cpu_allocator().stats().current_bytes;
  const int64_t n = r.model.config().num_parameters();
  EXPECT_EQ(loaded - evicted, n * (4 + 8 - 4));
  EXPECT_EQ(cpu_allocator().stats().peak_bytes, loaded);
  r.executor.step(r.data[1], {3e-3, 0});
  EXPECT_EQ(cpu_allocator().stats().current_bytes, evicted);
}

// Note [Recycled state memory]: a step's reads take the memory that the
// write-backs before them gave up. Hand count for 6 llama-fixture layers,
// every stage on disk, AdamW (each parameter's master, m and v: 3 tensors;
// embed 3, a block 9 parameters = 27, head 6) and reads two disk stages
// ahead: R(embed) R(b0) W(embed) R(b1) W(b0) R(b2) W(b1) R(b3) ... W(b4)
// R(head) W(b5) W(head). R(b2..b5) take the memory of b0..b3, alike; R(head)
// takes embed's for the lm_head (97 x 48, the embedding's size) and b4's
// 48-wide norm's: 3 + 27 + 27 = 57 tensors are allocated a step, not 171.
TEST(StreamingStates, ReadsReuseTheMemoryOfEarlierWriteBacks) {
  constexpr int layers = 6;
  const auto data = lt::testing::state_test_batches(2, llama(layers).config().vocab_size);
  auto second_step_allocations = [&](bool on_disk) {
    const TempDir dir("states_recycle");
    models::CausalLM model = llama(layers);
    auto opt = testing::test_optimizer(model, AdamW);
    StreamingOptions so = streaming_options(layers, dir.path(), false);
    so.overlap_optimizer = false;
    if (!on_disk) so.states_on_disk.clear();
    StreamingExecutor ex(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}), so);
    ex.step(data[0], {3e-3, 0});
    const int64_t before = cpu_allocator().stats().allocation_count;
    ex.step(data[1], {3e-3, 0});
    return cpu_allocator().stats().allocation_count - before;
  };
  EXPECT_EQ(second_step_allocations(true) - second_step_allocations(false), 57);
}

// Batch 2 x 16 tokens on the CPU stand-in (f32 compute).
TrainSizes stand_in_sizes() {
  TrainSizes sizes;
  sizes.batch_size = 2;
  sizes.seq_len = 16;
  sizes.compute_bytes = 4;
  sizes.on_gpu = false;
  return sizes;
}

// StepStats::states_disk_s: zero with every state in host memory; with
// states on a slow disk (each read and write-back delayed up to 40 ms, the
// stand-in's forward a few ms), the forward's waits for them, part of
// optimizer_s.
TEST(StreamingStates, TheForwardWaitingForTheDiskIsCounted) {
  const auto data = lt::testing::state_test_batches(3, llama(kLayers).config().vocab_size);
  for (bool on_disk : {false, true}) {
    SCOPED_TRACE(on_disk ? "disk" : "host");
    const TempDir dir("states_waits");
    models::CausalLM model = llama(kLayers);
    auto opt = testing::test_optimizer(model, AdamW);
    StreamingOptions so = streaming_options(kLayers, dir.path(), false);
    if (!on_disk) so.states_on_disk.clear();
    so.max_state_io_delay_us = 40000;
    StreamingExecutor ex(model, *opt, std::make_unique<StandInDevice>(StandInOptions{}), so);
    double disk = 0, optimizer = 0;
    const int64_t n = model.config().num_parameters();
    for (size_t k = 0; k < data.size(); ++k) {
      const StepStats st = ex.step(data[k], {3e-3, 0});
      EXPECT_LE(st.states_disk_s, st.optimizer_s + 1e-9);
      // From the second step on the forward waits for every stage's read
      // and write-back of the last update: masters, m and v, 12 bytes a
      // parameter each way, which took the states thread some time.
      const int64_t moved = on_disk && k > 0 ? 12 * n : 0;
      EXPECT_EQ(st.states_read_bytes, moved) << k;
      EXPECT_EQ(st.states_write_bytes, moved) << k;
      EXPECT_EQ(st.states_read_s > 0 && st.states_write_s > 0, moved > 0) << k;
      disk += st.states_disk_s;
      optimizer += st.optimizer_s;
    }
    if (on_disk) {
      // Five stages' write-backs and reads a step, ~20 ms each on average.
      EXPECT_GT(disk, 0.05) << "optimizer_s " << optimizer;
    } else {
      EXPECT_EQ(disk, 0);
    }
  }
}

// The executor writes the states out when it is built, before it
// allocates the gradient slabs: with AdamW on the stand-in it frees the
// masters, m and v (12 bytes a parameter) and adds an f32 upload copy and
// an f32 gradient slab (4 + 4), and host memory never holds the slabs
// beside the masters and states (that peak would be 8 bytes a parameter
// over the start).
TEST(StreamingStates, TheStatesLeaveBeforeTheGradientSlabsComeIn) {
  const TempDir dir("states_construct");
  models::CausalLM model = llama(kLayers);
  auto opt = testing::test_optimizer(model, AdamW);
  const int64_t n = model.config().num_parameters();
  const int64_t before = cpu_allocator().stats().current_bytes;
  cpu_allocator().reset_peak();
  auto executor = disk_executor(model, *opt, kLayers, dir.path(), false);
  const int64_t after = cpu_allocator().stats().current_bytes;
  const int64_t peak = cpu_allocator().stats().peak_bytes;
  EXPECT_EQ(after - before, -4 * n);
  EXPECT_LT(peak - before, 8 * n);
}

// The budget puts the masters and states on disk and three stages of them
// in host memory. Hand count for 4 layers of the llama fixture (hidden 48,
// 6 + 2 heads of 8, FFN 37, vocabulary 97, untied): embedding 97 x 48 =
// 4656; a block 2 x 48 x 48 + 2 x 48 x 16 (attention) + 3 x 48 x 37 (MLP) +
// 2 x 48 (norms) = 11568; head 48 + 4656 = 4704; n = 55632. The three
// largest stages are three blocks.
TEST(StreamingStates, BudgetCountsStatesOnDisk) {
  const models::ModelConfig c = llama(4).config();
  const int64_t n = 55632, in_flight = 3 * 11568;
  ASSERT_EQ(c.num_parameters(), n);
  TrainSizes sizes = stand_in_sizes();
  const MemoryBudget host = bytes_needed(c, sizes, Schedule::all_gpu(4));
  sizes.states_on_disk.assign(4 + 2, true);
  const MemoryBudget disk = bytes_needed(c, sizes, Schedule::all_gpu(4));
  EXPECT_EQ(disk.bytes(MemorySpace::Disk) - host.bytes(MemorySpace::Disk), n * 12);
  EXPECT_EQ(disk.bytes(MemorySpace::Gpu), host.bytes(MemorySpace::Gpu));
  // Host: the master and states go, three stages' come back, and the
  // upload copy is in the compute dtype (4) where the host count had bf16.
  EXPECT_EQ(host.bytes(MemorySpace::Host) - disk.bytes(MemorySpace::Host),
            n * 12 - in_flight * 12 + n * (2 - 4));
}

// With only some stages on disk, the budget moves just those stages'
// masters and states, and keeps the largest disk stages in flight. Hand
// count for the same 4-layer fixture: blocks 2 and 3 and the head on disk.
TEST(StreamingStates, BudgetCountsSomeStagesOnDisk) {
  const models::ModelConfig c = llama(4).config();
  const int64_t n = 55632, block = 11568, head = 4704;
  TrainSizes sizes = stand_in_sizes();
  const MemoryBudget host = bytes_needed(c, sizes, Schedule::all_gpu(4));
  sizes.states_on_disk = {false, false, false, true, true, true};
  const MemoryBudget some = bytes_needed(c, sizes, Schedule::all_gpu(4));
  const int64_t on_disk = 2 * block + head;
  ASSERT_LT(on_disk, n);
  EXPECT_EQ(some.bytes(MemorySpace::Disk) - host.bytes(MemorySpace::Disk), on_disk * 12);
  // The three disk stages are all in flight at the peak: the host gives up
  // only the bf16 count of their uploads for the compute dtype's (4).
  EXPECT_EQ(host.bytes(MemorySpace::Host) - some.bytes(MemorySpace::Host), on_disk * (2 - 4));
  sizes.states_on_disk = {false, true, true, true, true, true};
  const MemoryBudget more = bytes_needed(c, sizes, Schedule::all_gpu(4));
  const int64_t four = 4 * block + head;
  EXPECT_EQ(host.bytes(MemorySpace::Host) - more.bytes(MemorySpace::Host),
            four * 12 - 3 * block * 12 + four * (2 - 4));
}

// 64 KiB: the first stage's master alone is larger.
constexpr rlim_t kFileSizeLimit = 64 * 1024;

// A write the file system refuses (here: past RLIMIT_FSIZE, what a full
// disk looks like to the run) stops the run with the file, the operation and
// the stage; the scratch file is still removed.
TEST(StreamingStates, AFailedWriteNamesTheFileTheOperationAndTheStage) {
  const TempDir dir("states_no_space");
  const auto data = lt::testing::state_test_batches(1, llama(kLayers).config().vocab_size);
  models::CausalLM model = llama(kLayers);
  auto opt = testing::test_optimizer(model, AdamW);
  std::string e;
  {
    auto executor = disk_executor(model, *opt, kLayers, dir.path(), /*force_threads=*/true);
    StreamingExecutor& ex = *executor;
    ex.sync();  // the states back in host memory: the step writes them out again
    {
      const testing::FileSizeLimit limit(kFileSizeLimit);
      e = testing::error_of([&] { ex.step(data[0], {3e-3, 0}); });
    }
    EXPECT_FALSE(fs::is_empty(dir.path()));
    // Stopped: neither another step nor a sync() (before a checkpoint) goes on.
    EXPECT_EQ(e, testing::error_of([&] { ex.step(data[0], {3e-3, 0}); }));
    EXPECT_EQ(e, testing::error_of([&] { ex.sync(); }));
  }
  EXPECT_NE(e.find(dir.path().string()), std::string::npos) << e;
  EXPECT_NE(e.find(": write of "), std::string::npos) << e;
  EXPECT_NE(e.find("File too large"), std::string::npos) << e;
  EXPECT_NE(e.find("(stage '"), std::string::npos) << e;
  EXPECT_TRUE(fs::is_empty(dir.path()));
  // Built under the limit, the executor's first write-out fails the same way.
  models::CausalLM fresh = llama(kLayers);
  auto fresh_opt = testing::test_optimizer(fresh, AdamW);
  std::string built;
  {
    const testing::FileSizeLimit limit(kFileSizeLimit);
    built = testing::error_of(
        [&] { disk_executor(fresh, *fresh_opt, kLayers, dir.path(), /*force_threads=*/true); });
  }
  EXPECT_NE(built.find("File too large"), std::string::npos) << built;
  EXPECT_NE(built.find(dir.path().string()), std::string::npos) << built;
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// The model outlives its executor: destroyed with every stage on disk and
// its last updates queued, the executor gives the weights and states back.
TEST(StreamingStates, TheModelIsWholeAfterTheExecutorGoes) {
  const auto data = lt::testing::state_test_batches(2, llama(kLayers).config().vocab_size);
  const Result want = reference(AdamW8bit, data);
  const TempDir dir("states_teardown");
  models::CausalLM model = llama(kLayers);
  auto opt = testing::test_optimizer(model, AdamW8bit);
  Result got;
  {
    auto executor = disk_executor(model, *opt, kLayers, dir.path(), false);
    StreamingExecutor& ex = *executor;
    got.losses = run_steps(ex, data, 0, data.size());
  }
  for (const auto& [name, p] : model.parameters()) got.params.push_back(bytes_of(p));
  for (const auto& [name, t] : opt->state()) got.states.push_back(bytes_of(t));
  expect_same(want, got);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

}  // namespace
}  // namespace lt::exec
