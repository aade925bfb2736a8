// GPT-2 against transformers in llm.c's manner (its test_gpt2), on the CPU
// in f32: the logits, the loss and every parameter gradient on the golden's
// batch, then 10 AdamW steps with clipping 1.0 through the resident
// executor, whose losses and gradient norms must be torch's
// (tools/reference/make_gpt2_golden.py, float64; support/gpt2_golden.h).
// The norms are above 1 at every step, so clipping scales every update.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "support/gpt2_golden.h"

namespace lt::exec {
namespace {

namespace golden = testing::gpt2_golden;

TEST(Gpt2Golden, LogitsLossAndEveryGradientMatchTransformers) {
  const auto ref = golden::reference();
  models::CausalLM model = io::load_hf_model(golden::folder(), DType::F32);
  const golden::Step0 got = golden::step0(model, ref);

  const std::vector<double> logits = ref.at("logits").to_doubles();
  ASSERT_EQ(got.logits.size(), logits.size());
  double worst_logit = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    worst_logit = std::max(worst_logit, std::abs(got.logits[i] - logits[i]));
  }
  // f32 through two layers: measured ~1e-6 on logits of magnitude ~5.
  EXPECT_LT(worst_logit, 2e-5);
  EXPECT_LT(testing::relative_error_norm(got.logits, logits), 2e-6);

  const double loss = ref.at("loss").item();
  EXPECT_NEAR(got.loss, loss, 1e-6 * loss);

  std::string worst_name;
  const double worst_grad = golden::worst_gradient_error(got, ref, &worst_name);
  EXPECT_LT(worst_grad, 1e-5) << worst_name;
  std::printf(
      "gpt2 golden, f32: logits max |diff| %.3g, loss %.10f vs %.10f, worst gradient %s %.3g\n",
      worst_logit, got.loss, loss, worst_name.c_str(), worst_grad);
}

TEST(Gpt2Golden, TenClippedAdamWStepsMatchTorch) {
  const auto ref = golden::reference();
  const auto losses = golden::training("f64", "loss");
  const auto norms = golden::training("f64", "grad_norm");
  ASSERT_EQ(losses.size(), 10u);
  models::CausalLM model = io::load_hf_model(golden::folder(), DType::F32);
  const auto stats = golden::train(model, DType::F32, ref);
  ASSERT_EQ(stats.size(), 10u);
  for (size_t s = 0; s < 10; ++s) {
    EXPECT_FALSE(stats[s].skipped) << "step " << s;
    EXPECT_GT(norms[s], 1.0) << "step " << s << ": the golden does not exercise clipping";
    EXPECT_NEAR(stats[s].loss, losses[s], 1e-6 * losses[s])
        << "step " << s << ": lazytrain " << stats[s].loss << ", torch (f64) " << losses[s];
    EXPECT_NEAR(stats[s].grad_norm, norms[s], 1e-5 * norms[s])
        << "step " << s << ": lazytrain " << stats[s].grad_norm << ", torch (f64) " << norms[s];
    std::printf("step %zu: loss %.8f (torch %.8f), grad norm %.6f (torch %.6f)\n", s, stats[s].loss,
                losses[s], stats[s].grad_norm, norms[s]);
  }
}

}  // namespace
}  // namespace lt::exec
