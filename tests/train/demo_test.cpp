// The embedded demo (`lazytrain train` with no config), shortened: the loss
// of a model trained from scratch falls visibly within a few steps.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

TEST(Demo, LossFalls) {
  TempDir tmp("demo");
  const fs::path out = tmp / "runs";
  const auto start = std::chrono::steady_clock::now();
  std::string output;
  const int code = run_program(
      {"train", "--no-sample", "--set", "train.steps=16", "--set", "train.seq_len=64", "--set",
       "sched.warmup_steps=2", "--set", "train.save_every=0", "--set", "out.dir=" + out.string()},
      tmp / "demo.log", &output, 300);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(code, 0) << output;
  RecordProperty("seconds", std::to_string(seconds));
  auto losses = field(read_metrics(out), "loss");
  ASSERT_EQ(losses.size(), 16u);
  // From scratch the first loss is about ln(vocab) = ln 50257 = 10.8.
  EXPECT_NEAR(losses[0], std::log(50257.0), 0.5);
  const double last4 = (losses[12] + losses[13] + losses[14] + losses[15]) / 4;
  EXPECT_LE(last4, losses[0] - 0.5) << "first " << losses[0] << ", mean of the last 4 " << last4;
  EXPECT_TRUE(fs::exists(out / "step-16" / "trainer_state.json"));
  EXPECT_TRUE(fs::exists(out / "config.yaml"));
  // The saved config says what ran: train.dtype auto is resolved.
  const std::string saved = read_text(out / "config.yaml");
  EXPECT_EQ(saved.find("dtype: auto"), std::string::npos) << saved;
  EXPECT_TRUE(saved.find("dtype: f32") != std::string::npos ||
              saved.find("dtype: bf16") != std::string::npos)
      << saved;
  std::cout << "demo: 16 steps in " << seconds << " s, loss " << losses[0] << " -> " << last4
            << "\n";
}

}  // namespace
}  // namespace lt::train::testing
