// Disk stages' reads ahead of their own backward (Note [Updates during the
// backward], exec/streaming_early_updates.cpp): a read fills memory the
// stage's tensors do not point at, and the stage's update attaches it.
//  - The states thread's reads (the run's trace) start before their stage's
//    backward: with train.clip_with_previous_norm, the first
//    kStagesOfStatesInFlight disk stages in backward order; with exact
//    clipping (the first step: no previous norm), the first two in forward
//    order. Before, a read came only after its stage's backward.
//  - Host memory holds at most kStagesOfStatesInFlight stages' masters and
//    states at once: the step's host peak over what it holds at its start,
//    less the same for the run with every state in host memory (the
//    reference: its states never move), is the three largest disk stages'
//    bytes, counted from the model's parameters (AdamW: 12 a parameter).
//  - A flipped byte in a stage read ahead stops the run, the error naming
//    the file, the stage and the checksum.
//  - A step that fails mid-backward leaves no read in host memory.
// The losses and weights stay the host run's bit for bit
// (ClipWithPreviousNorm.*, StreamingStates.*).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/allocator.h"
#include "exec/memory_budget.h"
#include "exec/staged_states.h"
#include "exec/streaming.h"
#include "support/errors.h"
#include "support/fixture_models.h"
#include "support/state_files.h"
#include "train/train_helpers.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;
using testing::TestOptimizer;
using train::testing::TempDir;

constexpr int kLayers = 6;  // stages: embed 0, blocks 1..6, head 7
// Blocks 2..5 and the head on disk, as `auto` picks them: backward order
// e0..e4 = head, block.5, block.4, block.3, block.2.
const std::vector<bool> kOnDisk = {false, false, false, true, true, true, true, true};

double kNoNorm() {
  return std::numeric_limits<double>::quiet_NaN();
}

StepOptions previous_norm_step(double previous_norm) {
  StepOptions o;
  o.lr = 3e-3;
  o.max_grad_norm = 0.05;
  o.clip_with_previous_norm = true;
  o.previous_grad_norm = previous_norm;
  return o;
}

struct ReadAheadRun {
  const TempDir dir;
  models::CausalLM model = testing::random_fixture_model("llama", kLayers);
  std::unique_ptr<optim::Optimizer> opt = testing::test_optimizer(model, TestOptimizer::AdamW);
  std::vector<std::vector<data::Batch>> data =
      lt::testing::state_test_batches(4, model.config().vocab_size);
  std::vector<StageUse> uses;
  // Called after each stage use; set by the test.
  std::function<void(const StageUse&)> after_use;
  std::unique_ptr<StreamingExecutor> executor;

  explicit ReadAheadRun(std::vector<bool> on_disk, const std::string& name = "states_read_ahead")
      : dir(name) {
    StreamingOptions so;
    so.schedule = Schedule::all_gpu(kLayers);
    so.states_on_disk = std::move(on_disk);
    so.disk.directory = dir.path().string();
    so.overlap_optimizer = false;  // a step's memory is settled when it returns
    so.trace_path = (dir.path() / "trace.json").string();
    so.trace_steps = 3;
    so.observe_use = [this](size_t u, bool computed) {
      if (computed && after_use) after_use(uses[u]);
    };
    executor = std::make_unique<StreamingExecutor>(
        model, *opt, std::make_unique<StandInDevice>(StandInOptions{}), so);
    uses = executor->stage_uses();
  }
  std::string state_file() const {
    for (const auto& e : fs::directory_iterator(dir.path()))
      if (e.path().filename() != "trace.json") return e.path().string();
    return "";
  }
};

// Bytes of stage s's f32 masters and AdamW m and v.
int64_t stage_state_bytes(const models::CausalLM& model, size_t s) {
  nn::NamedParameters own;
  model.stages()[s]->collect(own);
  int64_t n = 0;
  for (const auto& [name, p] : own) n += p.numel();
  return 12 * n;
}

struct Span {
  std::string name;
  double begin_us = 0;
};

// The trace's spans on `track`, in the order they began.
std::vector<Span> spans_on(const std::string& path, const std::string& track) {
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  int tid = -1;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["args"]["name"] == track) tid = e["tid"].get<int>();
  std::vector<Span> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["tid"].get<int>() == tid)
      out.push_back({e["name"].get<std::string>(), e["ts"].get<double>()});
  std::stable_sort(out.begin(), out.end(),
                   [](const Span& a, const Span& b) { return a.begin_us < b.begin_us; });
  return out;
}

// When the k-th span called `name` began (k from 0), or infinity.
double kth_begin(const std::vector<Span>& spans, const std::string& name, int k) {
  for (const Span& s : spans)
    if (s.name == name && k-- == 0) return s.begin_us;
  return std::numeric_limits<double>::infinity();
}

TEST(StatesReadAhead, ReadsStartBeforeTheirStagesBackwardWithinTheMemoryBound) {
  ReadAheadRun host({}, "read_ahead_host"), disk(kOnDisk);
  std::vector<int64_t> extra(2);  // per run: the host peak over the start, of the last step
  for (ReadAheadRun* r : {&host, &disk}) {
    // The forward's last block waits a little: the states thread gets
    // there first whenever the step's reads were queued ahead of it.
    r->after_use = [](const StageUse& use) {
      if (use.work == StageWork::Forward && use.stage == kLayers)
        std::this_thread::sleep_for(std::chrono::milliseconds(40));
    };
    double previous = kNoNorm();
    for (int step = 0; step < 3; ++step) {
      const int64_t start = cpu_allocator().stats().current_bytes;
      const StepStats st =
          r->executor->step(r->data[static_cast<size_t>(step)], previous_norm_step(previous));
      ASSERT_FALSE(st.skipped);
      previous = st.grad_norm;
      extra[r == &disk] = st.peak_bytes.at("host") - start;
    }
    r->executor->sync_staged();  // waits for the updates, writes the trace
  }
  const std::string trace = (disk.dir.path() / "trace.json").string();
  const std::vector<Span> reads = spans_on(trace, "disk"), compute = spans_on(trace, "compute");
  const auto name = [&](size_t s) { return disk.model.stages()[s]->name(); };
  const auto backward_of = [&](size_t s) {
    return (s == kLayers + 1 ? "head " : "backward ") + name(s);
  };
  // Step 0 (exact clipping): block.2 and block.3, the first in forward order.
  for (size_t s : {3, 4})
    EXPECT_LT(kth_begin(reads, "read states " + name(s), 0), kth_begin(compute, backward_of(s), 0))
        << name(s);
  // Steps 1 and 2 (the previous norm): head, block.5, block.4.
  for (int step = 1; step < 3; ++step)
    for (size_t s : {7, 6, 5})
      EXPECT_LT(kth_begin(reads, "read states " + name(s), step),
                kth_begin(compute, backward_of(s), step))
          << name(s) << " step " << step;

  // The states thread's order: at most three stages read and not yet
  // written back at any time, and three at some time.
  std::map<std::string, size_t> stage_named;
  for (size_t s = 0; s < kOnDisk.size(); ++s) stage_named[name(s)] = s;
  int64_t held = 0, most = 0;
  for (const Span& sp : reads) {
    const bool read = sp.name.starts_with("read states ");
    const size_t s = stage_named.at(sp.name.substr(sp.name.find("states ") + 7));
    held += (read ? 1 : -1) * stage_state_bytes(disk.model, s);
    most = std::max(most, held);
  }
  EXPECT_EQ(held, 0);
  std::vector<int64_t> sizes;
  for (size_t s = 0; s < kOnDisk.size(); ++s)
    if (kOnDisk[s]) sizes.push_back(stage_state_bytes(disk.model, s));
  std::sort(sizes.rbegin(), sizes.rend());
  const int64_t three_largest = sizes[0] + sizes[1] + sizes[2];
  EXPECT_EQ(kStagesOfStatesInFlight, 3);
  EXPECT_EQ(most, three_largest);
  // And in host memory: the step's peak, beyond the host run's.
  EXPECT_EQ(extra[1] - extra[0], three_largest) << "the host run's " << extra[0];
}

// Block.5 and the head on disk: the file's first region is block.5's, read
// when a step with the previous norm starts (R(head) R(block.5)).
TEST(StatesReadAhead, AFlippedByteInAStageReadAheadStopsTheRun) {
  ReadAheadRun r({false, false, false, false, false, false, true, true});
  const StepStats first = r.executor->step(r.data[0], previous_norm_step(kNoNorm()));
  const StepStats second = r.executor->step(r.data[1], previous_norm_step(first.grad_norm));
  r.executor->sync_staged();
  const std::string path = r.state_file();
  ASSERT_FALSE(path.empty());
  lt::testing::flip_byte(path, 100);
  const std::string e = lt::testing::error_of([&] {
    r.executor->step(r.data[2], previous_norm_step(second.grad_norm));
    r.executor->sync_staged();
  });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find("checksum"), std::string::npos) << e;
  EXPECT_NE(e.find("reading the states of stage 'block.5'"), std::string::npos) << e;
  // The executor stays stopped.
  EXPECT_NE(lt::testing::error_of([&] {
              r.executor->step(r.data[3], previous_norm_step(kNoNorm()));
            }).find("checksum"),
            std::string::npos);
}

// Step 2 throws once block.5's backward has run: the head's update and
// write-back were queued, and block.5, block.4 and block.3 read ahead, none
// attached. Once the states thread is through, host memory holds what it
// held before the step; the next step runs.
TEST(StatesReadAhead, AStepThatFailsMidBackwardDropsItsReads) {
  ReadAheadRun r(kOnDisk);
  const StepStats first = r.executor->step(r.data[0], previous_norm_step(kNoNorm()));
  const StepStats second = r.executor->step(r.data[1], previous_norm_step(first.grad_norm));
  const int64_t before = cpu_allocator().stats().current_bytes;
  r.after_use = [](const StageUse& use) {
    if (use.work == StageWork::Backward && use.stage == kLayers) throw Error("stopped by the test");
  };
  EXPECT_EQ(lt::testing::error_of(
                [&] { r.executor->step(r.data[2], previous_norm_step(second.grad_norm)); }),
            "stopped by the test");
  r.after_use = nullptr;
  StagedStates* staged = r.executor->sync_staged();
  ASSERT_NE(staged, nullptr);
  staged->read(3);  // through the states thread, behind what the step queued
  EXPECT_EQ(cpu_allocator().stats().current_bytes, before);
  EXPECT_FALSE(r.executor->step(r.data[3], previous_norm_step(second.grad_norm)).skipped);
}

}  // namespace
}  // namespace lt::exec
