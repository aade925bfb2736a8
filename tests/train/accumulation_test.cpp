// Gradient accumulation: a step of 8 sequences gives the same loss (and so
// the same update) whether it is one micro-batch of 8, 2 of 4 or 4 of 2.
#include <gtest/gtest.h>

#include <cmath>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

TEST(Accumulation, MicroBatchesGiveTheSameStepsAsOneBatch) {
  TempDir tmp("accum");
  // 16 rows of lengths 3..18 (so micro-batches pad to different lengths),
  // some with masked prompts.
  write_random_tokens(tmp / "data.jsonl", 16, 97, 7);
  std::vector<std::vector<double>> losses, norms;
  for (int accum : {1, 2, 4}) {
    const fs::path out = tmp / ("accum" + std::to_string(accum));
    TrainConfig config = fixture_config(
        fixture("qwen2"), tmp / "data.jsonl", out,
        {"train.steps=3", "train.batch_size=8", "train.grad_accum=" + std::to_string(accum),
         "train.seq_len=32", "train.grad_clip=1.0", "optim.lr=3e-3"});
    train_quietly(config);
    auto metrics = read_metrics(out);
    ASSERT_EQ(metrics.size(), 3u) << "grad_accum " << accum;
    losses.push_back(field(metrics, "loss"));
    norms.push_back(field(metrics, "grad_norm"));
    // Every step sees the same 8 sequences' tokens.
    EXPECT_EQ(metrics[0].at("tokens"), read_metrics(tmp / "accum1")[0].at("tokens"));
  }
  for (size_t a = 1; a < losses.size(); ++a) {
    for (size_t s = 0; s < 3; ++s) {
      EXPECT_LE(std::abs(losses[a][s] - losses[0][s]), 1e-6 * std::abs(losses[0][s]))
          << "grad_accum " << (1 << a) << " step " << s << ": " << losses[a][s] << " vs "
          << losses[0][s];
      EXPECT_LE(std::abs(norms[a][s] - norms[0][s]), 1e-5 * std::abs(norms[0][s]))
          << "grad_accum " << (1 << a) << " step " << s << " grad_norm";
    }
  }
  // The updates did something: the loss moved.
  EXPECT_NE(losses[0][0], losses[0][2]);
}

}  // namespace
}  // namespace lt::train::testing
