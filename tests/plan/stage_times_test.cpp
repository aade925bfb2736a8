// Measured stage times (plan/stage_times.h): the line fit and chunking
// against numbers worked out by hand, the YAML round trip and its errors,
// and the planner's compute time against the hand sum of the stage times.
#include <gtest/gtest.h>

#include <optional>
#include <utility>
#include <vector>

#include "plan/cost_model.h"
#include "plan/hardware.h"
#include "plan/milp.h"
#include "plan/planner.h"
#include "plan/profile.h"
#include "plan/tiny_model.h"
#include "support/errors.h"

namespace lt::plan {
namespace {

using lt::testing::error_of;

TEST(StageTimes, DefaultBatchSizesBracketThePlannersChunks) {
  // On a GPU: the smallest chunk of >= 8192 tokens, half of it, and 4 times
  // it (the largest chunk the planner tries).
  const Device gpu = Device::cuda(0);
  EXPECT_EQ(default_stage_batch_sizes(gpu, 1024), (std::vector<int64_t>{4, 8, 32}));
  EXPECT_EQ(default_stage_batch_sizes(gpu, 1000), (std::vector<int64_t>{4, 9, 36}));
  EXPECT_EQ(default_stage_batch_sizes(gpu, 256), (std::vector<int64_t>{16, 32, 128}));
  EXPECT_EQ(default_stage_batch_sizes(gpu, 4096), (std::vector<int64_t>{1, 2, 8}));
  EXPECT_EQ(default_stage_batch_sizes(gpu, 8192), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(default_stage_batch_sizes(gpu, 32768), (std::vector<int64_t>{1, 2, 4}));
  // The planner's default chunk for such a batch is the middle one.
  EXPECT_EQ(default_chunk_sequences(64, 1024), 8);
  EXPECT_EQ(default_chunk_sequences(64, 256), 32);
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
  const StageCurve c = StageCurve::line(f, {2, 6});
  EXPECT_NEAR(c.seconds[0], 0.5, 1e-15);
  EXPECT_NEAR(c.seconds[1], 1.3, 1e-15);
  EXPECT_NEAR(c.chunked(8, 2), 2.0, 1e-14);
  EXPECT_NEAR(c.chunked(7, 2), 1.8, 1e-14);
  EXPECT_NEAR(c.chunked(8, 0), 1.7, 1e-14);
  // With an intercept >= 0 the bounds outside the sizes timed never bind:
  // batch 1 is the line's 0.3 (> 0.5 / 2 = 0.25), batch 10 its 2.1.
  EXPECT_NEAR(c.chunked(1, 0), 0.3, 1e-14);
  EXPECT_NEAR(c.chunked(10, 0), 2.1, 1e-14);
}

TEST(StageTimes, NegativeInterceptDoesNotExtrapolateCheaperChunks) {
  // Timed at 8 and 16: 8 -> -1 + 4 = 3 s, 16 -> 7 s (7/16 per sequence,
  // dearer than 3/8). Inside the range the line holds.
  const StageCurve g{{8, 16}, {3.0, 7.0}};
  EXPECT_NEAR(g.chunked(12, 0), 5.0, 1e-12);
  // Batch 16 in chunks of 4: the line says 4 x (-1 + 2) = 4 s, cheaper per
  // sequence than anything timed; held to batch 8's 3/8 s per sequence:
  // 4 x 1.5 = 6 s. Chunks of 8 (timed) give 2 x 3 = 6 s too, not more.
  EXPECT_NEAR(g.chunked(16, 4), 6.0, 1e-12);
  EXPECT_NEAR(g.chunked(16, 8), 6.0, 1e-12);
  // Above the range: the line's 32 -> 15 s is held to batch 16's 7/16 per
  // sequence: 14 s.
  EXPECT_NEAR(g.chunked(32, 0), 14.0, 1e-12);
  // A line sloping down (a noisy fit of a tiny stage): 1 s at 2, 0.5 s at
  // 4. Above the sizes timed more sequences still take 0.5 s, not the
  // line's 0 s at 6 or less.
  const StageCurve down{{2, 4}, {1.0, 0.5}};
  EXPECT_NEAR(down.chunked(6, 0), 0.5, 1e-12);
  EXPECT_NEAR(down.chunked(8, 0), 0.5, 1e-12);
  // Never negative: a first segment that reaches below zero before the
  // smallest size (-1 + 0.5 x batch through 4 and 8) is held to the
  // smallest's rate, 1 / 4 per sequence.
  const StageCurve steep = StageCurve::line({-1, 0.5}, {4, 8});
  EXPECT_NEAR(steep.chunked(4, 1), 1.0, 1e-12);
  EXPECT_NEAR(steep.chunked(4, 4), 1.0, 1e-12);
  EXPECT_NE(error_of([] { fit_line(3, 1, 3, 2); }).find("two different batch sizes"),
            std::string::npos);
}

// Three sizes: 4 -> 1.0 s, 8 -> 1.8 s, 32 -> 6.0 s. Between the points the
// segments (0.2 s per sequence from 4 to 8, then 4.2 / 24 = 0.175), below
// the first point the first segment (0.2 + 0.2 x batch), above the last the
// last (0.4 + 0.175 x batch), each held as chunked documents.
TEST(StageTimes, ThreePointsArePiecewiseLinear) {
  const StageCurve c{{4, 8, 32}, {1.0, 1.8, 6.0}};
  EXPECT_NEAR(c.at(4), 1.0, 1e-12);
  EXPECT_NEAR(c.at(6), 1.4, 1e-12);
  EXPECT_NEAR(c.at(8), 1.8, 1e-12);
  EXPECT_NEAR(c.at(16), 1.8 + 8 * 0.175, 1e-12);  // 3.2
  EXPECT_NEAR(c.at(32), 6.0, 1e-12);
  EXPECT_NEAR(c.at(2), 0.6, 1e-12);
  EXPECT_NEAR(c.at(64), 0.4 + 64 * 0.175, 1e-12);  // 11.6
  // Batch 64 in chunks of 32: 2 x 6.0; of 16: 4 x 3.2; of 8: 8 x 1.8; of 2:
  // 32 x max(0.6, 1.0 x 2 / 4) = 32 x 0.6; as one chunk: 11.6 (the last
  // segment's intercept is positive: below batch 32's rate, so kept).
  EXPECT_NEAR(c.chunked(64, 32), 12.0, 1e-12);
  EXPECT_NEAR(c.chunked(64, 16), 12.8, 1e-12);
  EXPECT_NEAR(c.chunked(64, 8), 14.4, 1e-12);
  EXPECT_NEAR(c.chunked(64, 2), 19.2, 1e-12);
  EXPECT_NEAR(c.chunked(64, 0), 11.6, 1e-12);
  // Batch 40 in chunks of 16: 2 x 3.2 + one of 8 (1.8).
  EXPECT_NEAR(c.chunked(40, 16), 8.2, 1e-12);
  // A last segment with a negative intercept (10 s at 32 after 1.8 at 8:
  // -0.93 + 0.342 x batch) is held above 32 to batch 32's 10 / 32 per
  // sequence: 20 s at 64, not the segment's 20.93.
  const StageCurve hot{{4, 8, 32}, {1.0, 1.8, 10.0}};
  EXPECT_NEAR(hot.chunked(64, 0), 20.0, 1e-12);
}

// Equal up to the 9 digits a profile is written with.
void expect_same_curve(const StageCurve& got, const StageCurve& want) {
  EXPECT_EQ(got.batches, want.batches);
  ASSERT_EQ(got.seconds.size(), want.seconds.size());
  for (size_t k = 0; k < want.seconds.size(); ++k)
    EXPECT_NEAR(got.seconds[k], want.seconds[k], 1e-9 * want.seconds[k]) << k;
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
  // The line [0.03, 0.05] at batch 1 and 2.
  EXPECT_EQ(t.block_backward, (StageCurve{{1, 2}, {0.03 + 0.05, 0.03 + 2 * 0.05}}));
  EXPECT_EQ(t.source, "hw.yaml");
  const HardwareProfile again = HardwareProfile::from_yaml_text(p.to_yaml(), "again.yaml");
  ASSERT_TRUE(again.stage_times.has_value());
  for (auto field :
       {&StageTimes::embed_forward, &StageTimes::embed_backward, &StageTimes::block_forward,
        &StageTimes::block_backward, &StageTimes::head_step})
    expect_same_curve((*again.stage_times).*field, t.*field);
  EXPECT_EQ(again.stage_times->vocab_size, 100);
  EXPECT_EQ(again.stage_times->device, "cpu");
  EXPECT_EQ(again.gpu_memory_gb, 80);
}

// The tiny Llama's shape timed at three sizes: each time the seconds at
// each size (made-up times).
std::string three_point_yaml(const std::string& replace_from = "", const std::string& to = "") {
  std::string y = tiny_times_yaml("  batch_sizes: [1, 2]\n", "  batch_sizes: [1, 2, 4]\n");
  for (const auto& [line, seconds] : std::vector<std::pair<std::string, std::string>>{
           {"embed_forward: [0.001, 0]", "embed_forward: [0.001, 0.001, 0.0015]"},
           {"embed_backward: [0.002, 0.001]", "embed_backward: [0.003, 0.004, 0.006]"},
           {"block_forward: [0.01, 0.02]", "block_forward: [0.03, 0.05, 0.08]"},
           {"block_backward: [0.03, 0.05]", "block_backward: [0.08, 0.13, 0.21]"},
           {"head_step: [0.02, 0.01]", "head_step: [0.03, 0.04, 0.055]"}})
    y.replace(y.find(line), line.size(), seconds);
  if (!replace_from.empty()) y.replace(y.find(replace_from), replace_from.size(), to);
  return y;
}

TEST(StageTimes, ThreePointYamlRoundTrip) {
  const HardwareProfile p = HardwareProfile::from_yaml_text(three_point_yaml(), "hw.yaml");
  ASSERT_TRUE(p.stage_times.has_value());
  const StageTimes& t = *p.stage_times;
  EXPECT_EQ(t.batch_sizes, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(t.block_forward, (StageCurve{{1, 2, 4}, {0.03, 0.05, 0.08}}));
  EXPECT_EQ(t.embed_forward, (StageCurve{{1, 2, 4}, {0.001, 0.001, 0.0015}}));
  // Batch 4 in chunks of 2 costs 2 x 0.05; as one chunk 0.08 (a line
  // through 1 and 2 would say 0.11).
  EXPECT_NEAR(t.block_forward.chunked(4, 2), 0.1, 1e-15);
  EXPECT_NEAR(t.block_forward.chunked(4, 0), 0.08, 1e-15);
  const std::string written = p.to_yaml();
  for (const char* line :
       {"stage_times:  # seconds for a chunk of `batch` sequences, at each of batch_sizes\n",
        "  batch_sizes: [1, 2, 4]\n", "  embed_forward: [0.001, 0.001, 0.0015]\n",
        "  embed_backward: [0.003, 0.004, 0.006]\n", "  block_forward: [0.03, 0.05, 0.08]\n",
        "  block_backward: [0.08, 0.13, 0.21]\n", "  head_step: [0.03, 0.04, 0.055]\n"})
    EXPECT_NE(written.find(line), std::string::npos) << line << " in\n" << written;
  const HardwareProfile again = HardwareProfile::from_yaml_text(written, "again.yaml");
  ASSERT_TRUE(again.stage_times.has_value());
  for (const auto& field :
       {&StageTimes::embed_forward, &StageTimes::embed_backward, &StageTimes::block_forward,
        &StageTimes::block_backward, &StageTimes::head_step})
    EXPECT_EQ((*again.stage_times).*field, t.*field);
}

TEST(StageTimes, ThreePointErrorsNameTheFileAndTheKey) {
  const auto error = [](const std::string& yaml) {
    return error_of([&] { HardwareProfile::from_yaml_text(yaml, "hw.yaml"); });
  };
  // A line where three sizes need three seconds.
  std::string e =
      error(three_point_yaml("block_forward: [0.03, 0.05, 0.08]", "block_forward: [0.03, 0.05]"));
  EXPECT_NE(e.find("hw.yaml: key 'stage_times.block_forward' (line 15): expected 3 numbers, the "
                   "seconds for a chunk of each of batch_sizes [1, 2, 4]"),
            std::string::npos)
      << e;
  e = error(three_point_yaml("head_step: [0.03, 0.04, 0.055]", "head_step: [0.03, 0.04, x]"));
  EXPECT_NE(e.find("hw.yaml: key 'stage_times.head_step'"), std::string::npos) << e;
  EXPECT_NE(e.find("expected 3 numbers"), std::string::npos) << e;
  e = error(
      three_point_yaml("block_backward: [0.08, 0.13, 0.21]", "block_backward: [0.08, 0.13, 0.12]"));
  EXPECT_NE(e.find("key 'stage_times.block_backward' (line 16): gives 0.12 s at batch 4, less "
                   "than 0.13 s at batch 2"),
            std::string::npos)
      << e;
  e = error(three_point_yaml("embed_forward: [0.001, 0.001, 0.0015]",
                             "embed_forward: [0, 0.001, 0.0015]"));
  EXPECT_NE(e.find("key 'stage_times.embed_forward' (line 13): gives 0 s at batch 1 (times must "
                   "be positive)"),
            std::string::npos)
      << e;
  e = error(three_point_yaml("batch_sizes: [1, 2, 4]", "batch_sizes: [1, 4, 2]"));
  EXPECT_NE(e.find("hw.yaml: key 'stage_times.batch_sizes' (line 12): expected the batch sizes "
                   "in ascending order, got 4 before 2"),
            std::string::npos)
      << e;
  e = error(three_point_yaml("batch_sizes: [1, 2, 4]", "batch_sizes: [4]"));
  EXPECT_NE(e.find("key 'stage_times.batch_sizes'"), std::string::npos) << e;
}

// The head's bend on the CPU with a vocabulary of 65536: 2^24 / 65536 =
// 256 tokens, at seq 64 four sequences.
TEST(StageTimes, WorkingSetsAreFittedOnOneSideOfTheHeadsBend) {
  models::ModelConfig c = testing::tiny_llama();
  c.vocab_size = 65536;
  const auto sizes = [&](std::vector<int64_t> b) {
    return working_set_sizes(c, 64, b, Device::cpu());
  };
  using Pair = std::optional<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(sizes({2, 8}), std::nullopt);             // 128 and 512 tokens: both sides
  EXPECT_EQ(sizes({2, 4, 8}), (Pair{{4, 8}}));        // 256 is the bend: above wins
  EXPECT_EQ(sizes({1, 2, 16}), (Pair{{1, 2}}));       // two below, one above
  EXPECT_EQ(sizes({1, 2, 3}), (Pair{{1, 3}}));        // all below: the outer two
  EXPECT_EQ(sizes({8, 16, 32}), (Pair{{8, 32}}));     // all above
  EXPECT_EQ(sizes({1, 8, 16, 32}), (Pair{{8, 32}}));  // three above
}

// Every field a different value, against the layout stage_times.h
// documents written out by hand: a field written under another's key, or
// read into another's member, changes a line or a value below.
TEST(StageTimes, EveryFieldIsWrittenAndReadUnderItsOwnKey) {
  StageTimes t;
  t.model_type = "qwen2";
  t.hidden_size = 11;
  t.intermediate_size = 12;
  t.num_attention_heads = 13;
  t.num_key_value_heads = 14;
  t.head_dim = 15;
  t.vocab_size = 16;
  t.seq_len = 17;
  t.device = "cuda";
  t.batch_sizes = {3, 5};
  const auto line = [&](double a, double b) { return StageCurve::line({a, b}, t.batch_sizes); };
  t.embed_forward = line(0.001, 0.0001);
  t.embed_backward = line(0.002, 0.0002);
  t.block_forward = line(0.003, 0.0003);
  t.block_backward = line(0.004, 0.0004);
  t.head_step = line(0.005, 0.0005);
  const std::string yaml = t.to_yaml();
  EXPECT_EQ(yaml,
            "stage_times:  # seconds for a chunk of `batch` sequences = a + b * batch\n"
            "  model_type: qwen2\n"
            "  hidden_size: 11\n"
            "  intermediate_size: 12\n"
            "  num_attention_heads: 13\n"
            "  num_key_value_heads: 14\n"
            "  head_dim: 15\n"
            "  vocab_size: 16\n"
            "  seq_len: 17\n"
            "  device: cuda\n"
            "  batch_sizes: [3, 5]\n"
            "  embed_forward: [0.001, 0.0001]\n"
            "  embed_backward: [0.002, 0.0002]\n"
            "  block_forward: [0.003, 0.0003]\n"
            "  block_backward: [0.004, 0.0004]\n"
            "  head_step: [0.005, 0.0005]\n");
  const HardwareProfile p = HardwareProfile::from_yaml_text(yaml, "hw.yaml");
  ASSERT_TRUE(p.stage_times.has_value());
  const StageTimes& r = *p.stage_times;
  EXPECT_EQ(r.model_type, "qwen2");
  EXPECT_EQ(r.hidden_size, 11);
  EXPECT_EQ(r.intermediate_size, 12);
  EXPECT_EQ(r.num_attention_heads, 13);
  EXPECT_EQ(r.num_key_value_heads, 14);
  EXPECT_EQ(r.head_dim, 15);
  EXPECT_EQ(r.vocab_size, 16);
  EXPECT_EQ(r.seq_len, 17);
  EXPECT_EQ(r.device, "cuda");
  EXPECT_EQ(r.batch_sizes, (std::vector<int64_t>{3, 5}));
  // Each line read back at batch 3 and 5.
  expect_same_curve(r.embed_forward, {{3, 5}, {0.0013, 0.0015}});
  expect_same_curve(r.embed_backward, {{3, 5}, {0.0026, 0.003}});
  expect_same_curve(r.block_forward, {{3, 5}, {0.0039, 0.0045}});
  expect_same_curve(r.block_backward, {{3, 5}, {0.0052, 0.006}});
  expect_same_curve(r.head_step, {{3, 5}, {0.0065, 0.0075}});
}

// The tiny Llama's shape (tiny_model.h) taken into each field, and each
// field that differs from the model refused under its own key.
TEST(StageTimes, EveryShapeFieldIsTakenFromAndCheckedAgainstTheModel) {
  const models::ModelConfig c = testing::tiny_llama();
  const StageTimes t = StageTimes::for_model(c, 8);
  EXPECT_EQ(t.model_type, "llama");
  EXPECT_EQ(t.hidden_size, 64);
  EXPECT_EQ(t.intermediate_size, 128);
  EXPECT_EQ(t.num_attention_heads, 4);
  EXPECT_EQ(t.num_key_value_heads, 2);
  EXPECT_EQ(t.head_dim, 16);
  EXPECT_EQ(t.vocab_size, 100);
  EXPECT_EQ(t.seq_len, 8);
  t.check_model(c);
  const std::pair<const char*, int64_t StageTimes::*> shape[] = {
      {"hidden_size", &StageTimes::hidden_size},
      {"intermediate_size", &StageTimes::intermediate_size},
      {"num_attention_heads", &StageTimes::num_attention_heads},
      {"num_key_value_heads", &StageTimes::num_key_value_heads},
      {"head_dim", &StageTimes::head_dim},
      {"vocab_size", &StageTimes::vocab_size}};
  for (const auto& [key, member] : shape) {
    StageTimes other = t;
    other.source = "hw.yaml";
    other.*member = 1000;
    const std::string e = error_of([&] { other.check_model(c); });
    EXPECT_NE(e.find("hw.yaml: key 'stage_times." + std::string(key) + "': measured for 1000"),
              std::string::npos)
        << e;
  }
  StageTimes other = t;
  other.model_type = "qwen2";
  EXPECT_NE(error_of([&] {
              other.check_model(c);
            }).find("key 'stage_times.model_type': measured for qwen2, but the model is llama"),
            std::string::npos);
}

// With several keys wrong, which one the error names: missing keys and
// non-positive times the first alphabetically (block_backward before
// embed_forward, though the file has them the other way round), shape keys
// that differ from the model the first in the file's order (hidden_size
// before head_dim).
TEST(StageTimes, SeveralBadKeysNameTheSameOneFirst) {
  const auto error = [](const std::string& yaml) {
    return error_of([&] { HardwareProfile::from_yaml_text(yaml, "hw.yaml"); });
  };
  std::string both_missing = tiny_times_yaml("  embed_forward: [0.001, 0]\n", "");
  both_missing.replace(both_missing.find("  block_backward: [0.03, 0.05]\n"),
                       std::string("  block_backward: [0.03, 0.05]\n").size(), "");
  std::string e = error(both_missing);
  EXPECT_NE(e.find("key 'stage_times.block_backward' is missing"), std::string::npos) << e;
  std::string both_negative =
      tiny_times_yaml("embed_forward: [0.001, 0]", "embed_forward: [-1, 0]");
  both_negative.replace(both_negative.find("block_backward: [0.03, 0.05]"),
                        std::string("block_backward: [0.03, 0.05]").size(),
                        "block_backward: [-1, 0]");
  e = error(both_negative);
  EXPECT_NE(e.find("'stage_times.block_backward' (line 16): gives -1 s at batch 1"),
            std::string::npos)
      << e;
  StageTimes t = StageTimes::for_model(testing::tiny_llama(), 8);
  t.source = "hw.yaml";
  t.head_dim = 1;
  t.hidden_size = 2;
  e = error_of([&] { t.check_model(testing::tiny_llama()); });
  EXPECT_NE(e.find("'stage_times.hidden_size': measured for 2"), std::string::npos) << e;
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
  o.chunk_sequences = 1;
  return o;
}

// Batch 2 in chunks of 1, each use at batch 1 (a + b):
//   block forward 0.03 x 2 = 0.06, block backward 0.08 x 2 = 0.16 (2 blocks),
//   head step 0.03 x 2 = 0.06, embed forward 0.001 x 2 + backward 0.003 x 2 = 0.008:
//   2 x (0.06 + 0.16) + 0.06 + 0.008 = 0.508 s; with the fused tail (the
//   planner's, Note [The fused tail]) its blocks' forward runs once, but
//   with the output's GEMM that a backward use skips: 0.06 s less for each
//   of its blocks, but for that GEMM's share of the forward (by FLOPs).
TEST(StageTimes, PlannerComputeIsTheSumOfMeasuredStageTimes) {
  if (!have_milp_solver()) GTEST_SKIP() << "built without CBC";
  const HardwareProfile hw = HardwareProfile::from_yaml_text(tiny_times_yaml(), "hw.yaml");
  const Plan p = make_plan(testing::tiny_llama(), hw, tiny_options());
  ASSERT_TRUE(p.feasible);
  ASSERT_GE(p.schedule.tail_blocks, 1);
  const double output_share = block_output_gemm_flops(testing::tiny_llama(), p.sizes) /
                              block_forward_flops(testing::tiny_llama(), p.sizes);
  EXPECT_NEAR(p.prediction.compute_s, 0.508 - p.schedule.tail_blocks * 0.06 * (1 - output_share),
              1e-12);
  PlanOptions apart = tiny_options();
  apart.fused_tail = false;
  EXPECT_NEAR(make_plan(testing::tiny_llama(), hw, apart).prediction.compute_s, 0.508, 1e-12);
  EXPECT_EQ(p.stage_times_from.rfind("measured (hw.yaml", 0), 0u) << p.stage_times_from;
  // Another sequence length: the FLOP model, and it says why.
  PlanOptions other = tiny_options();
  other.seq_len = 16;
  const Plan flop = make_plan(testing::tiny_llama(), hw, other);
  ASSERT_TRUE(flop.feasible);
  EXPECT_EQ(flop.stage_times_from.rfind("FLOP model", 0), 0u) << flop.stage_times_from;
  EXPECT_NE(flop.stage_times_from.find("seq_len 8"), std::string::npos) << flop.stage_times_from;
}

// The working sets: optional keys, written and read in pairs under their own
// names, each positive with a positive slope; the planner takes them for
// the device they were measured on (the CPU stand-in here: f32), with
// kMeasuredWorkingSetMargin, and the estimates for another.
TEST(StageTimes, MeasuredWorkingSetsAreOptionalPairedAndPlannedWith) {
  const std::string with =
      tiny_times_yaml("  head_step: [0.02, 0.01]\n",
                      "  head_step: [0.02, 0.01]\n  block_backward_bytes: [100, 20000]\n"
                      "  head_step_bytes: [50, 3000]\n");
  const HardwareProfile hw = HardwareProfile::from_yaml_text(with, "hw.yaml");
  ASSERT_TRUE(hw.stage_times->has_working_sets());
  EXPECT_EQ(hw.stage_times->block_backward_bytes, (LinearFit{100, 20000}));
  EXPECT_EQ(hw.stage_times->head_step_bytes, (LinearFit{50, 3000}));
  const std::string written = hw.to_yaml();
  EXPECT_NE(written.find("  block_backward_bytes: [100, 20000]\n  head_step_bytes: [50, 3000]\n"),
            std::string::npos)
      << written;
  const HardwareProfile again = HardwareProfile::from_yaml_text(written, "again.yaml");
  EXPECT_EQ(again.stage_times->head_step_bytes, (LinearFit{50, 3000}));
  // Without them (a profile from before): none, and none written.
  const HardwareProfile old = HardwareProfile::from_yaml_text(tiny_times_yaml(), "hw.yaml");
  EXPECT_FALSE(old.stage_times->has_working_sets());
  EXPECT_EQ(old.to_yaml().find("_bytes"), std::string::npos);
  // One without the other, or a non-positive one: named.
  std::string e = error_of([&] {
    HardwareProfile::from_yaml_text(
        tiny_times_yaml("  head_step: [0.02, 0.01]\n",
                        "  head_step: [0.02, 0.01]\n  head_step_bytes: [50, 3000]\n"),
        "hw.yaml");
  });
  EXPECT_NE(e.find("hw.yaml: keys 'stage_times.block_backward_bytes' and "
                   "'stage_times.head_step_bytes' come together"),
            std::string::npos)
      << e;
  e = error_of([&] {
    HardwareProfile::from_yaml_text(
        tiny_times_yaml("  head_step: [0.02, 0.01]\n",
                        "  head_step: [0.02, 0.01]\n  block_backward_bytes: [-90000, 20000]\n"
                        "  head_step_bytes: [50, 3000]\n"),
        "hw.yaml");
  });
  EXPECT_NE(e.find("hw.yaml: key 'stage_times.block_backward_bytes'"), std::string::npos) << e;
  EXPECT_NE(e.find("must be positive"), std::string::npos) << e;

  if (!have_milp_solver()) return;
  // Batch 1 on the stand-in (one chunk: the embed stage's backward adds no
  // chunk's dense gradient into another's): the peak use is the tail step
  // (the planner fuses both blocks with the head, Note [The fused tail]),
  // its working set a block's 100 + 20000 and the head's 50 + 3000, each
  // with 10% more, rounded up: 22110 + 3356 bytes, and the other block's
  // saved tensors (memory_budget.cpp: 4 x 64 + 2 x 64 + 2 x 32 + 3 x 128 =
  // 832 elements a token, of 8 tokens of f32): 26624 bytes.
  PlanOptions o = tiny_options();
  o.batch_size = 1;
  o.compute_bytes = 4;
  o.on_gpu = false;
  o.stages_on_device = false;  // their gradients would make the head step the peak use
  const auto working_set = [](const Plan& p) {
    for (const auto& i : p.budget.items)
      if (i.what.rfind("working set", 0) == 0) return i;
    return exec::MemoryItem{};
  };
  const Plan p = make_plan(testing::tiny_llama(), hw, o);
  ASSERT_TRUE(p.feasible);
  ASSERT_EQ(p.schedule.tail_blocks, 2);
  EXPECT_EQ(working_set(p).bytes, 22110 + 3356 + 26624);
  EXPECT_NE(working_set(p).what.find("as measured"), std::string::npos) << working_set(p).what;
  // Planned for a GPU (bf16), the CPU's measurement does not apply.
  o.compute_bytes = 2;
  o.on_gpu = true;
  const Plan gpu = make_plan(testing::tiny_llama(), hw, o);
  ASSERT_TRUE(gpu.feasible);
  EXPECT_EQ(working_set(gpu).what.find("as measured"), std::string::npos) << working_set(gpu).what;
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
