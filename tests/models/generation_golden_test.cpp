// Generation with the KV cache against transformers' generate on the model
// fixtures (tests/models/fixtures/families/generation_goldens.json, made by
// tools/reference/make_generation_goldens.py: f32 on the CPU, eager
// attention), for every family, and against recomputing without a cache.
//
// Tokens are compared up to the first step where the reference's two best
// logits are within kTieGap: f32 rounding in another order may pick the
// other one there, and after that the prefixes differ (issue 23's rule).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "io/hf_model.h"
#include "models/decode.h"
#include "support/generation_goldens.h"
#include "train/generate.h"
#include "train/generation.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<int32_t>> golden_prompts(const nlohmann::json& family) {
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : family.at("prompts")) prompts.push_back(p.at("prompt"));
  return prompts;
}

void expect_tokens(const std::vector<int32_t>& got, const nlohmann::json& want_run,
                   const std::string& what) {
  const std::vector<int32_t> want = want_run.at("tokens");
  const size_t n = testing::steps_before_tie(want_run.at("gaps"));
  if (n == want.size()) {
    EXPECT_EQ(got, want) << what;
    return;
  }
  ASSERT_GE(got.size(), n) << what;
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + n),
            std::vector<int32_t>(want.begin(), want.begin() + n))
      << what << " (compared up to the near-tie at step " << n << ")";
}

class GenerationGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GenerationGolden, GreedyMatchesTransformersGenerate) {
  const nlohmann::json& family = testing::generation_goldens().at("families").at(GetParam());
  const models::CausalLM model =
      io::load_hf_model(testing::family_fixtures() / GetParam(), DType::F32);
  const auto prompts = golden_prompts(family);
  GenerationOptions options;
  options.max_new_tokens = testing::generation_goldens().at("max_new_tokens");
  // One row at a time, and both rows in one padded batch.
  for (int64_t batch : {1, 2}) {
    options.batch_size = batch;
    const std::vector<Generation> out = generate(model, prompts, options);
    ASSERT_EQ(out.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      expect_tokens(
          out[i].tokens, family.at("prompts")[i].at("cpu_f32"),
          GetParam() + " prompt " + std::to_string(i) + " batch " + std::to_string(batch));
      EXPECT_EQ(out[i].finish, FinishReason::kLength);
    }
  }
}

TEST_P(GenerationGolden, FirstLogitsMatchTransformers) {
  const nlohmann::json& family = testing::generation_goldens().at("families").at(GetParam());
  const models::CausalLM model =
      io::load_hf_model(testing::family_fixtures() / GetParam(), DType::F32);
  NoGradGuard no_grad;
  for (const auto& row : family.at("prompts")) {
    const std::vector<int64_t> prompt = row.at("prompt");
    const auto t = static_cast<int64_t>(prompt.size());
    models::KvCache cache(model, 1, t + 1);
    const std::vector<int64_t> starts{0}, last{t - 1};
    const Tensor logits =
        models::forward_cached(model, Tensor::from_vector(prompt, {1, t}), starts, last, cache);
    const std::vector<double> got = logits.to_doubles();
    const std::vector<double> want = row.at("cpu_f32").at("first_logits");
    ASSERT_EQ(got.size(), want.size());
    for (size_t v = 0; v < got.size(); ++v) EXPECT_NEAR(got[v], want[v], 1e-4) << v;
  }
}

// With the EOS of the folder's generation_config.json, a row ends at it
// (the EOS is its last token), as transformers' run with EOS did.
TEST_P(GenerationGolden, StopsAtTheFoldersEos) {
  const nlohmann::json& family = testing::generation_goldens().at("families").at(GetParam());
  const models::CausalLM model =
      io::load_hf_model(testing::family_fixtures() / GetParam(), DType::F32);
  GenerationOptions options;
  options.max_new_tokens = testing::generation_goldens().at("max_new_tokens");
  options.eos_ids = eos_ids_for((testing::family_fixtures() / GetParam()).string(), model.config());
  const std::vector<int32_t> want_eos = family.at("eos_token_ids");
  // GPT-2's EOS (50256) lies outside the fixture's vocabulary of 97, which
  // the script leaves out; any id listed must be what the folder says.
  for (int32_t id : want_eos) {
    EXPECT_NE(std::find(options.eos_ids.begin(), options.eos_ids.end(), id), options.eos_ids.end());
  }
  const std::vector<Generation> out = generate(model, golden_prompts(family), options);
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& row = family.at("prompts")[i];
    if (!row.contains("cpu_f32_eos")) continue;
    const std::vector<int32_t> want = row.at("cpu_f32_eos");
    if (testing::steps_before_tie(row.at("cpu_f32").at("gaps")) < want.size()) continue;
    EXPECT_EQ(out[i].tokens, want) << GetParam() << " prompt " << i;
    const bool at_eos = static_cast<int64_t>(want.size()) < options.max_new_tokens;
    EXPECT_EQ(out[i].finish, at_eos ? FinishReason::kEos : FinishReason::kLength);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GenerationGolden,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gpt2"));

}  // namespace
}  // namespace lt::train
