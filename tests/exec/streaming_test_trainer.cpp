// `exec.mode: streaming` in the trainer: the same losses and the same saved
// weights as the resident executor, and clear errors for what is refused.
#include <gtest/gtest.h>

#include "io/hf_model.h"
#include "support/errors.h"
#include "train/train_helpers.h"

namespace lt::train::testing {
namespace {

struct Outcome {
  std::vector<double> losses;
  std::vector<std::vector<float>> params;  // of the final checkpoint
};

Outcome train_and_read(const std::string& family, const fs::path& data, const fs::path& out,
                       std::vector<std::string> overrides) {
  TrainConfig config = fixture_config(fixture(family), data, out, overrides);
  TrainRunResult result = train_quietly(config);
  Outcome o;
  o.losses = field(read_metrics(out), "loss");
  models::CausalLM saved = io::load_hf_model(result.last_checkpoint);
  for (const auto& [name, p] : saved.parameters()) o.params.push_back(p.to_vector<float>());
  return o;
}

TEST(StreamingTrainer, SameLossesAndWeightsAsResident) {
  TempDir tmp("streaming");
  write_random_tokens(tmp / "data.jsonl", 16, 97, 3);
  // llama: untied, so accumulation is bitwise too; qwen2: tied, one micro-batch.
  for (const auto& [family, accum] : {std::pair{"llama", 2}, std::pair{"qwen2", 1}}) {
    SCOPED_TRACE(family);
    const std::vector<std::string> common = {
        "train.steps=4",        "train.batch_size=4", "train.grad_accum=" + std::to_string(accum),
        "train.grad_clip=0.05", "optim.lr=3e-3",      "train.save_every=2"};
    auto with = [&](std::vector<std::string> extra) {
      extra.insert(extra.begin(), common.begin(), common.end());
      return extra;
    };
    Outcome resident =
        train_and_read(family, tmp / "data.jsonl", tmp / (std::string(family) + "_resident"),
                       with({"exec.mode=resident"}));
    Outcome streaming =
        train_and_read(family, tmp / "data.jsonl", tmp / (std::string(family) + "_streaming"),
                       with({"exec.mode=streaming", "exec.schedule=every_k", "exec.keep_every=2",
                             "exec.device_memory_gb=0.001"}));
    ASSERT_EQ(resident.losses.size(), 4u);
    EXPECT_EQ(resident.losses, streaming.losses);
    EXPECT_NE(resident.losses.front(), resident.losses.back());
    EXPECT_EQ(resident.params, streaming.params);
    // The first steps' timeline (its content is checked in streaming_test.cpp).
    EXPECT_TRUE(fs::exists(tmp / (std::string(family) + "_streaming") / "trace.json"));
  }
}

TEST(StreamingTrainer, ResumeContinuesLikeAnUninterruptedResidentRun) {
  TempDir tmp("streaming_resume");
  write_random_tokens(tmp / "data.jsonl", 12, 97, 11);
  auto overrides = [](int steps, const char* mode) {
    return std::vector<std::string>{"train.steps=" + std::to_string(steps),
                                    "train.batch_size=4",
                                    "train.grad_accum=2",
                                    "train.grad_clip=0.5",
                                    "optim.lr=5e-3",
                                    std::string("exec.mode=") + mode,
                                    "exec.schedule=every_k",
                                    "exec.keep_every=2"};
  };
  const fs::path data = tmp / "data.jsonl";
  train_quietly(fixture_config(fixture("llama"), data, tmp / "a", overrides(6, "resident")));
  // Streaming for 3 steps, saved (with its optimizer state after sync), then
  // resumed by streaming to 6.
  train_quietly(fixture_config(fixture("llama"), data, tmp / "b", overrides(3, "streaming")));
  train_quietly(fixture_config(fixture("llama"), data, tmp / "b", overrides(6, "streaming")),
                "latest");
  const auto a = field(read_metrics(tmp / "a"), "loss");
  const auto b = field(read_metrics(tmp / "b"), "loss");
  ASSERT_EQ(a.size(), 6u);
  EXPECT_EQ(a, b);
  EXPECT_EQ(read_text(tmp / "a" / "step-6" / "model.safetensors"),
            read_text(tmp / "b" / "step-6" / "model.safetensors"));
  EXPECT_EQ(read_text(tmp / "a" / "step-6" / "optimizer.safetensors"),
            read_text(tmp / "b" / "step-6" / "optimizer.safetensors"));
}

TEST(StreamingTrainer, RefusedCombinationsAreClear) {
  TempDir tmp("streaming_errors");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 3);
  auto error = [&](std::vector<std::string> overrides) {
    return lt::testing::error_of([&] {
      train_quietly(fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "out", overrides));
    });
  };
  EXPECT_NE(error({"exec.mode=offloaded"}).find("config key 'exec.mode' must be one of"),
            std::string::npos);
  const std::string missing = (tmp / "nope.json").string();
  EXPECT_NE(error({"exec.mode=streaming", "exec.schedule=" + missing}).find(missing),
            std::string::npos);
  write_text(
      tmp / "short.json",
      R"({"boundaries": [{"index": 0, "placement": "gpu"}, {"index": 1, "placement": "host"}]})");
  EXPECT_NE(error({"exec.mode=streaming", "exec.schedule=" + (tmp / "short.json").string()})
                .find("a model with 2 blocks has 3 boundaries"),
            std::string::npos);
  // Disk placements run now: tests/train/schedule_auto_test.cpp.
  EXPECT_NE(error({"exec.mode=streaming", "exec.keep_every=0"}).find("exec.keep_every"),
            std::string::npos);
  EXPECT_NE(error({"exec.mode=streaming", "exec.device_memory_gb=0.000001"}).find("out of memory"),
            std::string::npos);
}

}  // namespace
}  // namespace lt::train::testing
