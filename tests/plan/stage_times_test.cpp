// Measured stage times (plan/stage_times.h): the line fit and chunking
// against numbers worked out by hand, the YAML round trip and its errors,
// and the planner's compute time against the hand sum of the stage times.
#include <gtest/gtest.h>

#include "plan/hardware.h"
#include "plan/milp.h"
#include "plan/planner.h"
#include "plan/profile.h"
#include "plan/tiny_model.h"
#include "support/errors.h"

namespace lt::plan {
namespace {

using lt::testing::error_of;

TEST(StageTimes, DefaultBatchSizesBracketThePlannersChunk) {
  // On a GPU: the smallest chunk of >= 8192 tokens, and half of it.
  const Device gpu = Device::cuda(0);
  EXPECT_EQ(default_stage_batch_sizes(gpu, 1024), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(default_stage_batch_sizes(gpu, 1000), (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(default_stage_batch_sizes(gpu, 256), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(default_stage_batch_sizes(gpu, 4096), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(default_stage_batch_sizes(gpu, 8192), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(default_stage_batch_sizes(gpu, 32768), (std::vector<int64_t>{1, 2}));
  // The planner's default chunk for such a batch is the larger one.
  EXPECT_EQ(default_micro_batch(64, 1024), 8);
  EXPECT_EQ(default_micro_batch(64, 256), 32);
  // On the CPU, small: a chunk of 8192 tokens takes minutes there.
  EXPECT_EQ(default_stage_batch_sizes(Device::cpu(), 1024), (std::vector<int64_t>{1, 2}));
}

TEST(StageTimes, FitThroughTwoPointsAndChunks) {
  // (2, 0.5) and (6, 1.3): slope 0.8 / 4 = 0.2, intercept 0.5 - 0.4 = 0.1.
  const LinearFit f = fit_line(2, 0.5, 6, 1.3);
  EXPECT_NEAR(f.b, 0.2, 1e-15);
  EXPECT_NEAR(f.a, 0.1, 1e-15);
  EXPECT_NEAR(f.at(10), 2.1, 1e-14);
  // Batch 8 in chunks of 2: 4 x (0.1 + 0.4) = 2.0; batch 7: 3 x 0.5 + (0.1 + 0.2) = 1.8;
  // the whole batch at once: 0.1 + 1.6.
  StageTimes t;
  t.batch_sizes = {2, 6};
  EXPECT_NEAR(t.chunked(f, 8, 2), 2.0, 1e-14);
  EXPECT_NEAR(t.chunked(f, 7, 2), 1.8, 1e-14);
  EXPECT_NEAR(t.chunked(f, 8, 0), 1.7, 1e-14);
  // With an intercept >= 0 the bounds outside the sizes timed never bind:
  // batch 1 is the line's 0.3 (> 0.5 / 2 = 0.25), batch 10 its 2.1.
  EXPECT_NEAR(t.chunked(f, 1, 0), 0.3, 1e-14);
  EXPECT_NEAR(t.chunked(f, 10, 0), 2.1, 1e-14);
}

TEST(StageTimes, NegativeInterceptDoesNotExtrapolateCheaperChunks) {
  // Timed at 8 and 16: 8 -> -1 + 4 = 3 s, 16 -> 7 s (7/16 per sequence,
  // dearer than 3/8). Inside the range the line holds.
  const LinearFit g = fit_line(8, 3.0, 16, 7.0);
  StageTimes t;
  t.batch_sizes = {8, 16};
  EXPECT_NEAR(t.chunked(g, 12, 0), 5.0, 1e-12);
  // Batch 16 in chunks of 4: the line says 4 x (-1 + 2) = 4 s, cheaper per
  // sequence than anything timed; held to batch 8's 3/8 s per sequence:
  // 4 x 1.5 = 6 s. Chunks of 8 (timed) give 2 x 3 = 6 s too, not more.
  EXPECT_NEAR(t.chunked(g, 16, 4), 6.0, 1e-12);
  EXPECT_NEAR(t.chunked(g, 16, 8), 6.0, 1e-12);
  // Above the range: the line's 32 -> 15 s is held to batch 16's 7/16 per
  // sequence: 14 s.
  EXPECT_NEAR(t.chunked(g, 32, 0), 14.0, 1e-12);
  // Never negative: with no sizes recorded the line alone, floored at 0.
  StageTimes bare;
  EXPECT_EQ(bare.chunked(LinearFit{-1, 0.5}, 4, 1), 0.0);
  EXPECT_EQ(bare.chunked(LinearFit{-1, 0.5}, 4, 4), 1.0);
  EXPECT_NE(error_of([] { fit_line(3, 1, 3, 2); }).find("two different batch sizes"),
            std::string::npos);
}

// The tiny Llama's shape, timed at seq_len 8 (made-up times).
std::string tiny_times_yaml(const std::string& replace_from = "", const std::string& to = "") {
  std::string y =
      "gpu_memory_gb: 80\n"
      "stage_times:\n"
      "  model_type: llama\n  hidden_size: 64\n  intermediate_size: 128\n"
      "  num_attention_heads: 4\n  num_key_value_heads: 2\n  head_dim: 16\n  vocab_size: 100\n"
      "  seq_len: 8\n  device: cpu\n  batch_sizes: [1, 2]\n"
      "  embed_forward: [0.001, 0]\n  embed_backward: [0.002, 0.001]\n"
      "  block_forward: [0.01, 0.02]\n  block_backward: [0.03, 0.05]\n"
      "  head_step: [0.02, 0.01]\n";
  if (!replace_from.empty()) y.replace(y.find(replace_from), replace_from.size(), to);
  return y;
}

TEST(StageTimes, YamlRoundTrip) {
  const HardwareProfile p = HardwareProfile::from_yaml_text(tiny_times_yaml(), "hw.yaml");
  ASSERT_TRUE(p.stage_times.has_value());
  const StageTimes& t = *p.stage_times;
  EXPECT_EQ(t.model_type, "llama");
  EXPECT_EQ(t.hidden_size, 64);
  EXPECT_EQ(t.seq_len, 8);
  EXPECT_EQ(t.batch_sizes, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(t.block_backward, (LinearFit{0.03, 0.05}));
  EXPECT_EQ(t.source, "hw.yaml");
  const HardwareProfile again = HardwareProfile::from_yaml_text(p.to_yaml(), "again.yaml");
  ASSERT_TRUE(again.stage_times.has_value());
  for (auto field :
       {&StageTimes::embed_forward, &StageTimes::embed_backward, &StageTimes::block_forward,
        &StageTimes::block_backward, &StageTimes::head_step})
    EXPECT_EQ((*again.stage_times).*field, t.*field);
  EXPECT_EQ(again.stage_times->vocab_size, 100);
  EXPECT_EQ(again.stage_times->device, "cpu");
  EXPECT_EQ(again.gpu_memory_gb, 80);
}

TEST(StageTimes, MalformedEntriesNameTheFileAndTheKey) {
  const auto error = [](const std::string& yaml) {
    return error_of([&] { HardwareProfile::from_yaml_text(yaml, "hw.yaml"); });
  };
  std::string e = error(tiny_times_yaml("  head_step: [0.02, 0.01]\n", ""));
  EXPECT_NE(e.find("hw.yaml: key 'stage_times.head_step' is missing"), std::string::npos) << e;
  e = error(tiny_times_yaml("block_forward: [0.01, 0.02]", "block_forward: [0.01]"));
  EXPECT_NE(e.find("hw.yaml: key 'stage_times.block_forward'"), std::string::npos) << e;
  EXPECT_NE(e.find("expected [a, b]"), std::string::npos) << e;
  e = error(tiny_times_yaml("block_forward: [0.01, 0.02]", "block_forward: [0.01, -0.02]"));
  EXPECT_NE(e.find("'stage_times.block_forward'"), std::string::npos) << e;
  EXPECT_NE(e.find("slope"), std::string::npos) << e;
  e = error(tiny_times_yaml("head_step: [0.02, 0.01]", "head_step: [-0.05, 0.01]"));
  EXPECT_NE(e.find("'stage_times.head_step'"), std::string::npos) << e;
  EXPECT_NE(e.find("positive"), std::string::npos) << e;
  e = error(tiny_times_yaml("  device: cpu\n", "  device: cpu\n  flops: 3\n"));
  EXPECT_NE(e.find("unknown key 'stage_times.flops'"), std::string::npos) << e;
  e = error(tiny_times_yaml("hidden_size: 64", "hidden_size: wide"));
  EXPECT_NE(e.find("'stage_times.hidden_size'"), std::string::npos) << e;
  e = error("stage_times: 3\n");
  EXPECT_NE(e.find("hw.yaml: key 'stage_times': expected a mapping"), std::string::npos) << e;
}

PlanOptions tiny_options() {
  PlanOptions o;
  o.batch_size = 2;
  o.seq_len = 8;
  o.micro_batch = 1;
  return o;
}

// Batch 2 in chunks of 1, each use at batch 1 (a + b):
//   block forward 0.03 x 2 = 0.06, block backward 0.08 x 2 = 0.16 (2 blocks),
//   head step 0.03 x 2 = 0.06, embed forward 0.001 x 2 + backward 0.003 x 2 = 0.008:
//   2 x (0.06 + 0.16) + 0.06 + 0.008 = 0.508 s.
TEST(StageTimes, PlannerComputeIsTheSumOfMeasuredStageTimes) {
  if (!have_milp_solver()) GTEST_SKIP() << "built without CBC";
  const HardwareProfile hw = HardwareProfile::from_yaml_text(tiny_times_yaml(), "hw.yaml");
  const Plan p = make_plan(testing::tiny_llama(), hw, tiny_options());
  ASSERT_TRUE(p.feasible);
  EXPECT_NEAR(p.prediction.compute_s, 0.508, 1e-12);
  EXPECT_EQ(p.stage_times_from.rfind("measured (hw.yaml", 0), 0u) << p.stage_times_from;
  // Another sequence length: the FLOP model, and it says why.
  PlanOptions other = tiny_options();
  other.seq_len = 16;
  const Plan flop = make_plan(testing::tiny_llama(), hw, other);
  ASSERT_TRUE(flop.feasible);
  EXPECT_EQ(flop.stage_times_from.rfind("FLOP model", 0), 0u) << flop.stage_times_from;
  EXPECT_NE(flop.stage_times_from.find("seq_len 8"), std::string::npos) << flop.stage_times_from;
}

TEST(StageTimes, AnotherModelsTimesAreRefused) {
  const HardwareProfile hw = HardwareProfile::from_yaml_text(
      tiny_times_yaml("intermediate_size: 128", "intermediate_size: 256"), "hw.yaml");
  const std::string e = error_of([&] { make_plan(testing::tiny_llama(), hw, tiny_options()); });
  EXPECT_NE(e.find("hw.yaml: key 'stage_times.intermediate_size': measured for 256, but the "
                   "model has 128"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace lt::plan
