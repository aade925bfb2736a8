// Greedy decoding with the model on the GPU against the same model on the
// CPU (the reference, checked against transformers in tests/io), for the
// five fixture families in f32.
//
// Tolerance: the GPU's f32 GEMMs use TF32 (10-bit mantissa products), so
// its logits differ from the CPU's: measured 1.5e-3 to 2.6e-3 relative
// error norm on the H200 (2026-11-30) after a whole forward (the issue's
// 1e-3 is per op; these are several GEMMs deep), checked below against
// 1e-2, far under what a wrong kernel gives (order 1). The argmax
// can only differ where the CPU's two best logits are closer than that
// error. So the tokens must be equal, except that they may part at a
// near-tie: where the CPU's logits of the two tokens differ by less than
// kTieMargin. After that the two prefixes differ, so the comparison stops
// there (the count of equal tokens is printed for the record).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/tensor.h"
#include "gpu_test_support.h"
#include "io/hf_model.h"
#include "support/gradcheck.h"
#include "train/generate.h"

namespace lt::train {
namespace {

const Device kGpu = Device::cuda(0);
constexpr int64_t kNewTokens = 12;
// Absolute logit gap that TF32 rounding may close: the fixtures' logits
// are O(1), their TF32 error O(1e-3); ten times that.
constexpr double kTieMargin = 1e-2;

std::filesystem::path fixture(const std::string& family) {
  return std::filesystem::path(LT_SOURCE_DIR) / "tests/models/fixtures/families" / family;
}

// The CPU's last-position logits after `tokens`.
std::vector<double> last_logits(const models::CausalLM& model, const std::vector<int32_t>& tokens) {
  NoGradGuard no_grad;
  std::vector<int64_t> ids(tokens.begin(), tokens.end());
  const auto t = static_cast<int64_t>(ids.size());
  Tensor logits = model.logits(Tensor::from_vector(ids, {1, t}).to(model.device()));
  return logits.select(0, 0).select(0, t - 1).to(Device::cpu()).to_doubles();
}

class GreedyGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(GreedyGpu, MatchesTheCpuTokens) {
  LT_REQUIRE_GPU();
  const models::CausalLM cpu = io::load_hf_model(fixture(GetParam()), DType::F32);
  models::CausalLM gpu = io::load_hf_model(fixture(GetParam()), DType::F32);
  gpu.to(kGpu, DType::F32);
  ASSERT_TRUE(gpu.device().is_cuda());
  const int64_t vocab = cpu.config().vocab_size;
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < 7; ++i) prompt.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));

  // The logits themselves (see the tolerance above).
  const std::vector<double> want = last_logits(cpu, prompt);
  const std::vector<double> got = last_logits(gpu, prompt);
  EXPECT_LT(testing::relative_error_norm(got, want), 1e-2);

  const std::vector<int32_t> on_cpu = greedy_generate(cpu, prompt, kNewTokens);
  const std::vector<int32_t> on_gpu = greedy_generate(gpu, prompt, kNewTokens);
  ASSERT_EQ(on_cpu.size(), static_cast<size_t>(kNewTokens));
  ASSERT_EQ(on_gpu.size(), on_cpu.size());
  std::vector<int32_t> prefix = prompt;
  size_t matched = 0;
  for (; matched < on_cpu.size(); ++matched) {
    if (on_gpu[matched] != on_cpu[matched]) break;
    prefix.push_back(on_cpu[matched]);
  }
  if (matched < on_cpu.size()) {
    // A near-tie on the CPU at the first divergence, or a real error.
    const std::vector<double> l = last_logits(cpu, prefix);
    const double margin =
        l[static_cast<size_t>(on_cpu[matched])] - l[static_cast<size_t>(on_gpu[matched])];
    EXPECT_LT(std::abs(margin), kTieMargin)
        << GetParam() << ": token " << matched << " is " << on_gpu[matched] << " on the GPU, "
        << on_cpu[matched] << " on the CPU, whose logits differ by " << margin;
  }
  std::printf("[greedy] %s: %zu of %zu tokens equal\n", GetParam().c_str(), matched, on_cpu.size());
}

INSTANTIATE_TEST_SUITE_P(Families, GreedyGpu,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gpt2"));

}  // namespace
}  // namespace lt::train
