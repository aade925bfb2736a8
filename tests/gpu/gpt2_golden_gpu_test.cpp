// The GPT-2 goldens (support/gpt2_golden.h: transformers in float64, llm.c's
// test_gpt2 checks) on the GPU in bf16: the logits, loss and every gradient
// of the bf16 model, and 10 clipped AdamW steps of the resident executor
// (f32 masters, bf16 compute), each within bf16 tolerance of torch's f64
// run. The model has head_dim 64 (the attention GPT-2 124M runs) and an odd
// vocabulary (the fused head pads it). Run with the defaults (fused head,
// one-pass LayerNorm backward) and with the earlier kernels
// (LT_LM_HEAD=unfused, LT_LAYER_NORM_BACKWARD=two_pass).
// Bounds: about 3x what the CPU backend's own bf16 run of the same checks
// measured (dev VM, 2026-12-02): logits 7.9e-3 (relative error norm), loss
// 2.2e-4, worst gradient 1.4e-2 (ln_1.weight of layer 0; most 0.6-1.2e-2);
// over the 10 steps losses within 8.8e-4 and norms within 3.2e-3 of torch,
// the loss's fall within 0.1% of torch's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "gpu_test_support.h"
#include "support/gpt2_golden.h"
#include "support/scoped_env.h"

namespace lt::exec {
namespace {

namespace golden = testing::gpt2_golden;

constexpr double kLogitsTolerance = 2.5e-2;   // relative error norm over all logits
constexpr double kStep0LossTolerance = 1e-3;  // relative
constexpr double kGradientTolerance = 4e-2;   // relative error norm, worst parameter
constexpr double kLossTolerance = 5e-3;       // relative, each of the 10 steps
constexpr double kNormTolerance = 1.5e-2;     // relative, each step's norm before clipping
constexpr double kLossFallTolerance = 2e-2;   // relative, first loss minus last

class Gpt2GoldenGpu : public ::testing::TestWithParam<bool> {
 protected:
  // GetParam(): the earlier kernels (unfused head, two-pass LayerNorm
  // backward) instead of the defaults.
  testing::ScopedEnv head_{"LT_LM_HEAD", GetParam() ? "unfused" : nullptr};
  testing::ScopedEnv norm_{"LT_LAYER_NORM_BACKWARD", GetParam() ? "two_pass" : nullptr};
  const char* label() const { return GetParam() ? "earlier kernels" : "defaults"; }
};

TEST_P(Gpt2GoldenGpu, Bf16LogitsLossAndGradientsMatchTransformers) {
  LT_REQUIRE_GPU();
  const auto ref = golden::reference();
  models::CausalLM model = io::load_hf_model(golden::folder(), DType::F32);
  model.to(Device::cuda(0), DType::BF16);
  const golden::Step0 got = golden::step0(model, ref);

  const double logits_err = testing::relative_error_norm(got.logits, ref.at("logits").to_doubles());
  const double loss = ref.at("loss").item();
  std::string worst_name;
  const double grad_err = golden::worst_gradient_error(got, ref, &worst_name);
  EXPECT_LT(logits_err, kLogitsTolerance) << label();
  EXPECT_LT(std::abs(got.loss - loss) / loss, kStep0LossTolerance)
      << label() << ": bf16 loss " << got.loss << ", torch (f64) " << loss;
  EXPECT_LT(grad_err, kGradientTolerance) << label() << ": " << worst_name;
  std::printf(
      "gpt2 golden, bf16 GPU (%s): logits relative error %.3g, loss %.6f vs %.6f, "
      "worst gradient %s %.3g\n",
      label(), logits_err, got.loss, loss, worst_name.c_str(), grad_err);
}

TEST_P(Gpt2GoldenGpu, Bf16TenClippedAdamWStepsTrackTorch) {
  LT_REQUIRE_GPU();
  const auto ref = golden::reference();
  const auto losses = golden::training("f64", "loss");
  const auto norms = golden::training("f64", "grad_norm");
  models::CausalLM model = io::load_hf_model(golden::folder(), DType::F32);
  model.to(Device::cuda(0), DType::F32);
  const auto stats = golden::train(model, DType::BF16, ref);
  ASSERT_EQ(stats.size(), losses.size());
  for (size_t s = 0; s < stats.size(); ++s) {
    EXPECT_FALSE(stats[s].skipped) << label() << " step " << s;
    EXPECT_LT(std::abs(stats[s].loss - losses[s]) / losses[s], kLossTolerance)
        << label() << " step " << s << ": bf16 " << stats[s].loss << ", torch (f64) " << losses[s];
    EXPECT_LT(std::abs(stats[s].grad_norm - norms[s]) / norms[s], kNormTolerance)
        << label() << " step " << s << ": bf16 grad norm " << stats[s].grad_norm << ", torch (f64) "
        << norms[s];
    std::printf("%s step %zu: loss %.6f (torch %.6f), grad norm %.5f (torch %.5f)\n", label(), s,
                stats[s].loss, losses[s], stats[s].grad_norm, norms[s]);
  }
  // The 10 steps learned what torch's learned (the loss falls from 6.15 to 1.94).
  const double drop = stats.front().loss - stats.back().loss;
  const double torch_drop = losses.front() - losses.back();
  EXPECT_LT(std::abs(drop - torch_drop), kLossFallTolerance * torch_drop)
      << label() << ": bf16 loss fell by " << drop << ", torch's by " << torch_drop;
}

INSTANTIATE_TEST_SUITE_P(Kernels, Gpt2GoldenGpu, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Earlier" : "Defaults"; });

}  // namespace
}  // namespace lt::exec
