// The stage plan's holds (exec/streaming_plan.h, device_holds), as
// exec::held_bytes counts them for the memory budget, against a brute-force
// count of what the streaming executor holds: the stand-in device's own
// allocator, read at the two points of every stage use of a real step. The
// stand-in lands a download only when the executor waits for it, so every
// buffer a copy needs is held as long as the executor allows (the worst the
// copy engines can do) and the count does not depend on timing.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/random.h"
#include "exec/memory_budget.h"
#include "exec/stand_in_device.h"
#include "exec/streaming.h"
#include "models/causal_lm.h"
#include "optim/adamw.h"
#include "support/random_batch.h"

namespace lt::exec {
namespace {

constexpr int kBlocks = 5;
constexpr int64_t kRows = 4, kSeq = 8;

models::ModelConfig config(bool tied) {
  return models::ModelConfig::from_json_text(
      std::string(R"({"model_type": "llama", "hidden_size": 48, "num_hidden_layers": 5,
          "num_attention_heads": 6, "num_key_value_heads": 2, "intermediate_size": 37,
          "vocab_size": 97, "tie_word_embeddings": )") +
          (tied ? "true}" : "false}"),
      "holds");
}

// kRows sequences of kSeq tokens: every chunk and boundary of one size.
data::Batch batch(uint64_t seed) {
  Generator gen(seed);
  return testing::random_token_batch(gen, kRows, kSeq, 97);
}

Schedule schedule(std::vector<Placement> boundaries, int64_t chunk,
                  std::vector<int> read_windows = {}) {
  Schedule s;
  s.batch_size = kRows;
  s.chunk_sequences = chunk;
  s.boundaries = std::move(boundaries);
  s.read_windows = std::move(read_windows);
  return s;
}

// Device bytes in use at each point of each step: [step][use] = {start, end}.
std::vector<std::vector<HeldBytes>> measure(const models::ModelConfig& c, const Schedule& s,
                                            const std::string& spill, int steps) {
  Generator gen(11);
  models::CausalLM model = models::CausalLM::random(c, gen);
  optim::AdamW adam(model.parameters(), optim::AdamWOptions{});
  StandInOptions device_options;
  device_options.copies_when_waited = true;
  StandInDevice device(device_options);
  std::vector<std::vector<HeldBytes>> seen(static_cast<size_t>(steps));
  int step = 0;
  StreamingOptions o;
  o.schedule = s;
  o.disk.directory = spill;
  o.observe_use = [&](size_t use, bool computed) {
    auto& points = seen[static_cast<size_t>(step)];
    if (points.size() <= use) points.resize(use + 1);
    (computed ? points[use].at_end : points[use].at_start) = device.memory().stats().current_bytes;
  };
  StreamingExecutor streaming(model, adam, device, o);
  for (step = 0; step < steps; ++step) streaming.step({batch(5 + static_cast<uint64_t>(step))}, {});
  streaming.sync();
  return seen;
}

// held_bytes against two steps of the executor (the second's forward
// overlaps the first's updates).
void expect_holds_as_budgeted(const models::ModelConfig& c, const Schedule& s,
                              const std::string& spill) {
  const TrainSizes sizes{kRows, kSeq, OptimizerStates::Fp32, 4, {}, {}, 2048, false};
  const std::vector<HeldBytes> expected = held_bytes(c, sizes, s);
  const auto seen = measure(c, s, spill, 2);
  for (size_t step = 0; step < seen.size(); ++step) {
    ASSERT_EQ(seen[step].size(), expected.size());
    for (size_t u = 0; u < expected.size(); ++u) {
      EXPECT_EQ(seen[step][u].at_start, expected[u].at_start) << "step " << step << " use " << u;
      EXPECT_EQ(seen[step][u].at_end, expected[u].at_end) << "step " << step << " use " << u;
    }
  }
}

TEST(StreamingHolds, TheBudgetsPointsAreWhatTheExecutorHolds) {
  using P = Placement;
  const std::string spill = ::testing::TempDir() + "lt_holds_spill";
  std::filesystem::create_directories(spill);
  const std::vector<Schedule> schedules = {
      schedule({P::Gpu, P::Gpu, P::Gpu, P::Gpu, P::Gpu, P::Gpu}, 0),
      schedule({P::Gpu, P::Host, P::Host, P::Host, P::Host, P::Gpu}, 1),
      schedule({P::Gpu, P::Recompute, P::Recompute, P::Recompute, P::Recompute, P::Gpu}, 2),
      schedule({P::Gpu, P::Host, P::Recompute, P::Disk, P::Recompute, P::Gpu}, 1),
      schedule({P::Gpu, P::Recompute, P::Host, P::Gpu, P::Disk, P::Gpu}, 0),
      // Read windows: boundaries 1 and 2 come back at the head step.
      schedule({P::Gpu, P::Host, P::Disk, P::Gpu, P::Host, P::Gpu}, 1, {-1, 5, 5, -1, -1, -1}),
      // Boundary 0 recomputed: the embed stage runs again in backward.
      schedule({P::Recompute, P::Gpu, P::Recompute, P::Gpu, P::Host, P::Recompute}, 3),
  };
  for (bool tied : {false, true}) {
    const models::ModelConfig c = config(tied);
    for (const Schedule& s : schedules) {
      SCOPED_TRACE((tied ? "tied " : "untied ") + to_json(s).dump());
      expect_holds_as_budgeted(c, s, spill);
    }
  }
  std::filesystem::remove_all(spill);
}

// Stages on the device (Note [Stages on the device]): their masters and
// states for good, their gradients from their backward to the step's end,
// no slot; a tied head on the device reads the embedding's device copy.
TEST(StreamingHolds, StagesOnTheDeviceAreWhatTheExecutorHolds) {
  using P = Placement;
  const std::string spill = ::testing::TempDir() + "lt_holds_device_spill";
  std::filesystem::create_directories(spill);
  const std::vector<std::vector<int>> kept = {{0, 2}, {3}, {0, 6}, {0, 1, 2, 3, 4, 5, 6}, {1, 5}};
  for (bool tied : {false, true}) {
    const models::ModelConfig c = config(tied);
    std::vector<std::vector<int>> lists = kept;
    if (!tied) lists.push_back({6});  // an untied head alone
    for (const auto& list : lists) {
      for (Schedule s :
           {schedule({P::Gpu, P::Gpu, P::Gpu, P::Gpu, P::Gpu, P::Gpu}, 0),
            schedule({P::Gpu, P::Host, P::Recompute, P::Disk, P::Recompute, P::Gpu}, 1)}) {
        s.stages_on_device = list;
        SCOPED_TRACE((tied ? "tied " : "untied ") + to_json(s).dump());
        expect_holds_as_budgeted(c, s, spill);
      }
    }
  }
  std::filesystem::remove_all(spill);
}

// Note [The fused tail]: the last 1, 3 or 5 blocks and the head as one
// use, with the later stages' own slots loaded a use ahead; the tail's
// input boundary recomputed or kept, the tail's stages or others on the
// device.
TEST(StreamingHolds, TheFusedTailIsWhatTheExecutorHolds) {
  using P = Placement;
  const std::string spill = ::testing::TempDir() + "lt_holds_fused_spill";
  std::filesystem::create_directories(spill);
  const std::vector<std::vector<int>> kept = {{}, {0}, {5}, {0, 6}, {4, 5}};
  for (bool tied : {false, true}) {
    const models::ModelConfig c = config(tied);
    for (const auto& list : kept) {
      for (Schedule s :
           {schedule({P::Gpu, P::Gpu, P::Gpu, P::Gpu, P::Gpu, P::Gpu}, 1),
            schedule({P::Recompute, P::Recompute, P::Gpu, P::Recompute, P::Recompute, P::Gpu}, 2),
            schedule({P::Gpu, P::Recompute, P::Recompute, P::Recompute, P::Recompute, P::Gpu},
                     0)}) {
        s.stages_on_device = list;
        for (int tail : {1, 3, 5}) {
          s.tail_blocks = tail;
          SCOPED_TRACE((tied ? "tied " : "untied ") + to_json(s).dump());
          expect_holds_as_budgeted(c, s, spill);
        }
      }
    }
  }
  std::filesystem::remove_all(spill);
}

}  // namespace
}  // namespace lt::exec
