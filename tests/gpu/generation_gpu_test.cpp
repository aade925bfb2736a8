// KV-cache generation on the GPU: the cache kernels against the CPU's (the
// reference, itself checked against recomputation and transformers in
// tests/models), and greedy generation in bf16 against transformers' bf16
// generate on the GPU (generation_goldens.json, "cuda_bf16": sdpa
// attention, made by tools/reference/make_generation_goldens.py).
//
// Tolerance for tokens: bf16 keeps 8 significant bits, so logits of size
// ~5-10 carry rounding of a few 1e-2 after a forward, and two kernels that
// round in another order (ours, torch's) can swap two tokens whose logits
// are that close. Tokens are compared up to the first step where the
// reference's two best logits are within kBf16TieGap (issue 23's rule with a
// bf16-sized gap); the count compared is printed for the record.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "gpu_test_support.h"
#include "io/hf_model.h"
#include "models/decode.h"
#include "nn/cuda/argmax.h"
#include "nn/kv_cache.h"
#include "support/gradcheck.h"
#include "train/generation.h"
#include "train/generation_sampling.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;
const Device kGpu = Device::cuda(0);
constexpr double kBf16TieGap = 0.125;

fs::path families() {
  return fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families";
}

TEST(CacheKernelsGpu, MatchTheCpu) {
  LT_REQUIRE_GPU();
  NoGradGuard no_grad;
  Generator gen(5);
  const int64_t b = 3, t = 2, hq = 6, hkv = 2, d = 40, capacity = 33;
  const std::vector<int64_t> starts = {0, 7, 30};
  const nn::CacheStep cpu_step = nn::CacheStep::make(starts, t, Device::cpu());
  const nn::CacheStep gpu_step = nn::CacheStep::make(starts, t, kGpu);
  for (DType dtype : {DType::F32, DType::BF16}) {
    // Inputs rounded to `dtype` first, so both sides read the same values.
    const Tensor q = Tensor::randn({b, t, hq, d}, gen).to(dtype).to(DType::F32);
    const Tensor k0 = Tensor::randn({b, capacity, hkv, d}, gen).to(dtype).to(DType::F32);
    const Tensor v0 = Tensor::randn({b, capacity, hkv, d}, gen).to(dtype).to(DType::F32);
    const Tensor kn = Tensor::randn({b, t, hkv, d}, gen).to(dtype).to(DType::F32);
    const Tensor vn = Tensor::randn({b, t, hkv, d}, gen).to(dtype).to(DType::F32);
    nn::KvLayer cpu{k0.clone(), v0.clone()};
    nn::KvLayer gpu{k0.to(kGpu, dtype), v0.to(kGpu, dtype)};
    nn::write_cache(cpu.k, kn, cpu_step);
    nn::write_cache(cpu.v, vn, cpu_step);
    nn::write_cache(gpu.k, kn.to(kGpu, dtype), gpu_step);
    nn::write_cache(gpu.v, vn.to(kGpu, dtype), gpu_step);
    EXPECT_EQ(gpu.k.to(Device::cpu()).to(DType::F32).to_doubles(), cpu.k.to_doubles());
    const double scale = 0.17;
    const std::vector<double> want = nn::cached_attention(q, cpu, cpu_step, scale).to_doubles();
    const std::vector<double> got = nn::cached_attention(q.to(kGpu, dtype), gpu, gpu_step, scale)
                                        .to(Device::cpu())
                                        .to(DType::F32)
                                        .to_doubles();
    // f32: sums in another order; bf16: the output's own rounding (2^-8).
    EXPECT_LT(testing::relative_error_norm(got, want), dtype == DType::F32 ? 1e-5 : 8e-3)
        << dtype_name(dtype);
  }
}

// The GPU's greedy argmax against the CPU's, ties (to the lowest id) included.
TEST(CacheKernelsGpu, ArgmaxMatchesTheCpu) {
  LT_REQUIRE_GPU();
  Generator gen(2);
  const int64_t rows = 5, cols = 151936;
  Tensor logits = Tensor::randn({rows, cols}, gen).to(DType::BF16).to(DType::F32);
  float* p = logits.data<float>();
  p[1 * cols + 7] = p[1 * cols + 9000] = 50.0f;  // a tie: 7 wins
  p[3 * cols + cols - 1] = 60.0f;                // the last column
  for (DType dtype : {DType::F32, DType::BF16}) {
    const std::vector<int32_t> got =
        nn::cuda::argmax_rows(logits.to(kGpu, dtype)).to(Device::cpu()).to_vector<int32_t>();
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got[r], argmax_token({p + r * cols, static_cast<size_t>(cols)}))
          << "row " << r << " " << dtype_name(dtype);
    }
  }
}

class GenerationGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(GenerationGpu, GreedyBf16MatchesTransformersBf16) {
  LT_REQUIRE_GPU();
  std::ifstream in(families() / "generation_goldens.json");
  const nlohmann::json goldens = nlohmann::json::parse(in);
  const nlohmann::json& family = goldens.at("families").at(GetParam());
  models::CausalLM model = io::load_hf_model(families() / GetParam(), DType::F32);
  model.to(kGpu, DType::BF16);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : family.at("prompts")) prompts.push_back(p.at("prompt"));
  GenerationOptions options;
  options.max_new_tokens = goldens.at("max_new_tokens");
  options.batch_size = 2;
  const std::vector<Generation> out = generate(model, prompts, options);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& run = family.at("prompts")[i].at("cuda_bf16");
    const std::vector<int32_t> want = run.at("tokens");
    size_t n = 0;
    while (n < want.size() && run.at("gaps")[n].get<double>() >= kBf16TieGap) ++n;
    ASSERT_GE(out[i].tokens.size(), n);
    EXPECT_EQ(std::vector<int32_t>(out[i].tokens.begin(), out[i].tokens.begin() + n),
              std::vector<int32_t>(want.begin(), want.begin() + n))
        << GetParam() << " prompt " << i;
    size_t equal = 0;
    while (equal < want.size() && out[i].tokens[equal] == want[equal]) ++equal;
    std::printf(
        "[bf16 generate] %s prompt %zu: %zu of %zu tokens compared (gap >= %.3f), %zu equal\n",
        GetParam().c_str(), i, n, want.size(), kBf16TieGap, equal);
  }
}

// The cache on the GPU against recomputing on the GPU, both bf16: the
// prompt step is the same arithmetic; decoding steps are close.
TEST_P(GenerationGpu, Bf16CacheEqualsRecomputing) {
  LT_REQUIRE_GPU();
  NoGradGuard no_grad;
  models::CausalLM model = io::load_hf_model(families() / GetParam(), DType::F32);
  model.to(kGpu, DType::BF16);
  const int64_t vocab = model.config().vocab_size;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 6; ++i) ids.push_back((i * 29 + 3) % vocab);
  models::KvCache cache(model, 1, 32);
  std::vector<int64_t> starts{0}, last{5};
  models::forward_cached(model, Tensor::from_vector(ids, {1, 6}).to(kGpu), starts, last, cache);
  last = {0};
  for (int64_t step = 0; step < 20; ++step) {
    const int64_t token = (step * 41 + 7) % vocab;
    starts = {static_cast<int64_t>(ids.size())};
    ids.push_back(token);
    const std::vector<double> got =
        models::forward_cached(model,
                               Tensor::from_vector(std::vector<int64_t>{token}, {1, 1}).to(kGpu),
                               starts, last, cache)
            .to(Device::cpu())
            .to(DType::F32)
            .to_doubles();
    const auto t = static_cast<int64_t>(ids.size());
    const std::vector<double> want = model.logits(Tensor::from_vector(ids, {1, t}).to(kGpu))
                                         .select(0, 0)
                                         .select(0, t - 1)
                                         .to(Device::cpu())
                                         .to(DType::F32)
                                         .to_doubles();
    // Both in bf16 with different attention kernels: a few bf16 roundings.
    EXPECT_LT(testing::relative_error_norm(got, want), 2e-2) << GetParam() << " step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GenerationGpu,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gpt2"));

}  // namespace
}  // namespace lt::train
