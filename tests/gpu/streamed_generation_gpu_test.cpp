// Streamed generation on the GPU (Note [Streamed generation],
// exec/streamed_weights.h): blocks in pinned host memory, copied through
// device slots by the CUDA streaming device on its own stream. The weights
// are the resident model's bf16 values and the kernels the same, so greedy
// tokens must equal the resident bf16 model's token for token; on the
// fixtures they are also compared with transformers' bf16 generate
// (generation_goldens.json "cuda_bf16", up to the first near-tie, as
// generation_gpu_test does).
//   - the fixtures through lazytrain's own setup (load_generation_model and
//     place_generation_model with --device-memory-gb one byte short of the
//     whole model's footprint: everything streams);
//   - a 12-block random model with more slots' worth of traffic, batch 1
//     and 4, every layout: blocks only through one or two slots, and the
//     ends as well.
// Filter: --gtest_filter='StreamedGenerationGpu*'
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/random.h"
#include "exec/cuda/streaming_device_cuda.h"
#include "exec/streamed_weights.h"
#include "gpu_test_support.h"
#include "io/hf_model.h"
#include "support/fixture_models.h"
#include "train/generation.h"
#include "train/generation_placement.h"
#include "train/generation_setup.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;
const Device kGpu = Device::cuda(0);
constexpr double kBf16TieGap = 0.125;  // as generation_gpu_test.cpp

fs::path families() {
  return fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families";
}

class StreamedGenerationGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamedGenerationGpu, ACapStreamsAndEqualsResidentAndTransformers) {
  LT_REQUIRE_GPU();
  std::ifstream in(families() / "generation_goldens.json");
  const nlohmann::json goldens = nlohmann::json::parse(in);
  const nlohmann::json& family = goldens.at("families").at(GetParam());
  const std::string dir = (families() / GetParam()).string();
  data::PromptSet prompts;
  std::vector<std::vector<int32_t>> ids;
  int64_t longest = 0;
  for (const auto& p : family.at("prompts")) {
    ids.push_back(p.at("prompt"));
    prompts.rows.push_back({0, ids.back(), std::nullopt});
    longest = std::max(longest, static_cast<int64_t>(ids.back().size()));
  }
  GenerationOptions options;
  options.max_new_tokens = goldens.at("max_new_tokens");
  options.batch_size = 2;

  GenerationModel resident = load_generation_model(dir, "", "cuda", false, "test");
  place_generation_model(resident, 0, prompts, options.batch_size, options.max_new_tokens);
  ASSERT_FALSE(resident.streamed);
  const std::vector<Generation> want = generate(resident.model, ids, options);

  GenerationModel streamed = load_generation_model(dir, "", "cuda", false, "test");
  const GenerationFootprint f = generation_footprint(streamed.model, DType::BF16, 2, longest,
                                                     longest + options.max_new_tokens);
  int64_t bytes = f.kv_cache + f.working - 1;
  for (const exec::StageBytes& s : f.stages) bytes += s.own;
  place_generation_model(streamed, static_cast<double>(bytes) / 1e9, prompts, options.batch_size,
                         options.max_new_tokens);
  ASSERT_TRUE(streamed.streamed) << generation_device_text(streamed);
  std::printf("[streamed generate] %s: %s\n", GetParam().c_str(),
              generation_device_text(streamed).c_str());
  options.streamed = streamed.streamed.get();
  const std::vector<Generation> got = generate(streamed.model, ids, options);
  EXPECT_GT(streamed.streamed->loads(), options.max_new_tokens);

  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << GetParam() << " prompt " << i;
    const auto& run = family.at("prompts")[i].at("cuda_bf16");
    const std::vector<int32_t> reference = run.at("tokens");
    size_t n = 0;
    while (n < reference.size() && run.at("gaps")[n].get<double>() >= kBf16TieGap) ++n;
    ASSERT_GE(got[i].tokens.size(), n);
    EXPECT_EQ(std::vector<int32_t>(got[i].tokens.begin(), got[i].tokens.begin() + n),
              std::vector<int32_t>(reference.begin(), reference.begin() + n))
        << GetParam() << " prompt " << i << " against transformers bf16, up to step " << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, StreamedGenerationGpu,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gpt2"));

TEST(StreamedGenerationGpu, TwelveBlocksEveryLayoutEqualsResident) {
  LT_REQUIRE_GPU();
  models::ModelConfig config = lt::testing::twelve_block_qwen2_config();
  config.max_position_embeddings = 256;
  auto make = [&] {
    Generator gen(3);
    return models::CausalLM::random(config, gen);
  };
  Generator prompt_gen(8);
  std::vector<std::vector<int32_t>> prompts;
  for (int r = 0; r < 4; ++r) {
    std::vector<int32_t> p;
    for (int t = 0; t < 20 + 7 * r; ++t)
      p.push_back(static_cast<int32_t>(prompt_gen.next_u64() % config.vocab_size));
    prompts.push_back(p);
  }
  models::CausalLM resident = make();
  resident.to(kGpu, DType::BF16);
  for (int64_t batch : {1, 4}) {
    GenerationOptions options;
    options.max_new_tokens = 40;
    options.batch_size = batch;
    const std::vector<Generation> want = generate(resident, prompts, options);
    std::vector<bool> blocks(14, true), all(14, true);
    blocks.front() = blocks.back() = false;
    for (const auto& [name, layout] :
         std::vector<std::pair<std::string, exec::StreamLayout>>{{"blocks, 1 slot", {blocks, 1}},
                                                                 {"blocks, 2 slots", {blocks, 2}},
                                                                 {"all, 2 slots", {all, 2}}}) {
      exec::CudaStreamingDevice device(0);  // before the model: it holds the pinned weights
      models::CausalLM model = make();
      exec::StreamedWeights streamed(model, device, layout);
      options.streamed = &streamed;
      const std::vector<Generation> got = generate(model, prompts, options);
      options.streamed = nullptr;
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(got[i].tokens, want[i].tokens) << name << ", batch " << batch << ", row " << i;
      std::printf("[streamed generate] 12 blocks, %s, batch %ld: %ld copies, %.3f s waited\n",
                  name.c_str(), static_cast<long>(batch), static_cast<long>(streamed.loads()),
                  streamed.upload_wait_s());
    }
  }
}

}  // namespace
}  // namespace lt::train
