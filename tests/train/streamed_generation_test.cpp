// Streamed generation (Note [Streamed generation], exec/streamed_weights.h)
// on the CPU stand-in device (exec/stand_in_device.h), whose copies are
// worker threads delayed at random: greedy tokens equal the resident
// model's token for token (the stand-in computes in f32 with the same
// kernels), and so transformers' generate on the model fixtures
// (generation_goldens.json, compared as tests/models/generation_golden_test
// does), for every family, with blocks, ends or both streamed through one
// to three slots. The number of copies says each streamed stage came in
// once per forward. The placement (train/generation_placement.h) is
// checked against hand counts, and its estimate against the stand-in's
// hard capacity.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/stand_in_device.h"
#include "exec/streamed_weights.h"
#include "io/hf_model.h"
#include "support/generation_goldens.h"
#include "train/generation.h"
#include "train/generation_placement.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

struct Layout {
  const char* name;
  std::vector<bool> streamed;  // embed, block 0, block 1, head
  int slots;
};

// The fixtures have two blocks. Each layout streams more stages than it has
// slots, so that every forward copies every streamed stage in again.
const std::vector<Layout> kLayouts = {
    {"blocks through one slot", {false, true, true, false}, 1},
    {"every stage through two slots", {true, true, true, true}, 2},
    {"every stage through three slots", {true, true, true, true}, 3},
    {"ends and block 1 through two slots", {true, false, true, true}, 2},
};

class StreamedGeneration : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamedGeneration, EqualsTheResidentModelAndTransformers) {
  const nlohmann::json& family = testing::generation_goldens().at("families").at(GetParam());
  const models::CausalLM resident =
      io::load_hf_model(testing::family_fixtures() / GetParam(), DType::F32);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : family.at("prompts")) prompts.push_back(p.at("prompt"));
  GenerationOptions options;
  options.max_new_tokens = testing::generation_goldens().at("max_new_tokens");
  options.batch_size = 2;  // both prompts in one padded batch
  const std::vector<Generation> want = generate(resident, prompts, options);

  for (const Layout& layout : kLayouts) {
    SCOPED_TRACE(GetParam() + ": " + layout.name);
    exec::StandInOptions stand_in;
    stand_in.max_copy_delay_us = 200;      // a hold that does not wait reads a half-copied slot
    exec::StandInDevice device(stand_in);  // before the model, whose weights it holds
    models::CausalLM model = io::load_hf_model(testing::family_fixtures() / GetParam(), DType::F32);
    exec::StreamedWeights streamed(model, device, {layout.streamed, layout.slots});
    options.streamed = &streamed;
    const std::vector<Generation> got = generate(model, prompts, options);
    options.streamed = nullptr;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << "prompt " << i;
      EXPECT_EQ(got[i].finish, want[i].finish) << "prompt " << i;
      const auto& run = family.at("prompts")[i].at("cpu_f32");
      const std::vector<int32_t> reference = run.at("tokens");
      size_t n = 0;
      while (n < reference.size() && run.at("gaps")[n].get<double>() >= testing::kGenerationTieGap)
        ++n;
      ASSERT_GE(got[i].tokens.size(), n);
      EXPECT_EQ(std::vector<int32_t>(got[i].tokens.begin(), got[i].tokens.begin() + n),
                std::vector<int32_t>(reference.begin(), reference.begin() + n))
          << "prompt " << i << " against transformers, up to step " << n;
    }
    // One forward for the prompts and one per later token (every row runs
    // to max_new_tokens here); each copies every streamed stage once, and
    // the first also fetches the slots - 1 after it.
    int64_t streamed_stages = 0;
    for (bool s : layout.streamed) streamed_stages += s ? 1 : 0;
    EXPECT_EQ(streamed.loads(), options.max_new_tokens * streamed_stages + layout.slots - 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, StreamedGeneration,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gpt2"));

// A tied head (Qwen2's fixture) streamed with the embedding resident reads
// the embedding where it lies: only its norm is copied.
TEST(StreamedWeights, ATiedHeadCopiesOnlyWhatIsNotOnTheDevice) {
  exec::StandInDevice device;
  models::CausalLM model = io::load_hf_model(testing::family_fixtures() / "qwen2", DType::F32);
  ASSERT_TRUE(model.config().tie_word_embeddings);
  const std::vector<exec::StageBytes> bytes = exec::stage_bytes(model, DType::F32);
  exec::StreamedWeights streamed(model, device, {{false, true, true, true}, 2});
  EXPECT_EQ(streamed.streamed_bytes(), bytes[1].reads + bytes[2].reads + bytes[3].own);
  EXPECT_EQ(streamed.resident_bytes(), bytes[0].own);
  // The head reads the embedding as well: its bytes plus the norm's.
  EXPECT_EQ(bytes[3].reads, bytes[3].own + bytes[0].own);
}

// Stage bytes by hand: embed 100, four blocks of 50, head 100; KV cache 30,
// working memory 20.
GenerationFootprint hand_footprint() {
  GenerationFootprint f;
  f.stages = {{100, 100}, {50, 50}, {50, 50}, {50, 50}, {50, 50}, {100, 100}};
  f.kv_cache = 30;
  f.working = 20;
  return f;
}

TEST(GenerationPlacement, FollowsTheHandCount) {
  const GenerationFootprint f = hand_footprint();
  // 400 of weights + 50 fit in 450: nothing streams.
  GenerationPlacement p = place_generation(f, 450, "--device-memory-gb", "test");
  EXPECT_FALSE(p.streamed);
  EXPECT_EQ(p.device_bytes, 450);
  // 449: ends stay (200 + 50 fixed), two slots of 50, one block stays.
  p = place_generation(f, 449, "--device-memory-gb", "test");
  ASSERT_TRUE(p.streamed);
  EXPECT_FALSE(p.ends_streamed);
  EXPECT_EQ(p.layout.streamed, (std::vector<bool>{false, false, true, true, true, false}));
  EXPECT_EQ(p.streamed_blocks, 3);
  EXPECT_EQ(p.streamed_bytes, 150);
  EXPECT_EQ(p.device_bytes, 50 + 200 + 100 + 50);
  // 350: the ends stay beside exactly two slots; no block does.
  p = place_generation(f, 350, "--device-memory-gb", "test");
  EXPECT_EQ(p.streamed_blocks, 4);
  EXPECT_FALSE(p.ends_streamed);
  // 300: the ends do not fit beside two slots, so they stream too, and a
  // slot holds the largest stage (100); one block fits beside.
  p = place_generation(f, 300, "--device-memory-gb", "test");
  ASSERT_TRUE(p.streamed);
  EXPECT_TRUE(p.ends_streamed);
  EXPECT_EQ(p.layout.streamed, (std::vector<bool>{true, false, true, true, true, true}));
  EXPECT_EQ(p.streamed_bytes, 3 * 50 + 200);
  EXPECT_EQ(p.device_bytes, 50 + 200 + 50);
}

TEST(GenerationPlacement, ABudgetTooSmallNamesTheOptionAndTheBytes) {
  const GenerationFootprint f = hand_footprint();
  try {
    place_generation(f, 249, "--device-memory-gb 2.49e-07", "2 rows of 9 positions");
    FAIL() << "249 bytes cannot hold 50 fixed and two slots of 100";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--device-memory-gb 2.49e-07 (249 bytes) is too small"), std::string::npos)
        << what;
    EXPECT_NE(what.find("two weight slots of 100 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("250 bytes in all"), std::string::npos) << what;
    EXPECT_NE(what.find("KV cache for 2 rows of 9 positions takes 30 bytes"), std::string::npos)
        << what;
  }
  // The cache and working memory alone: lower the batch or the lengths.
  try {
    place_generation(f, 50, "--device-memory-gb 5e-08", "2 rows");
    FAIL() << "50 bytes cannot hold the cache and working memory";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("before any weights"), std::string::npos) << what;
    EXPECT_NE(what.find("lower --batch-size or --max-new-tokens"), std::string::npos) << what;
  }
}

// The placement's count of a capped run is an upper bound of what the run
// allocates: the stand-in refuses any allocation past its capacity.
TEST(GenerationPlacement, APlannedRunFitsTheStandInsCapacity) {
  const fs::path dir = testing::family_fixtures() / "llama";
  std::vector<std::vector<int32_t>> prompts = {{5, 9, 11, 3, 7, 1, 2}, {40, 41}};
  GenerationOptions options;
  options.max_new_tokens = 9;
  options.batch_size = 2;
  const models::CausalLM resident = io::load_hf_model(dir, DType::F32);
  const std::vector<Generation> want = generate(resident, prompts, options);

  const GenerationFootprint f = generation_footprint(resident, DType::F32, 2, 7, 16);
  int64_t weights = 0;
  for (const exec::StageBytes& s : f.stages) weights += s.own;
  // One byte short of everything: the smallest streaming placement.
  const int64_t budget = weights + f.kv_cache + f.working - 1;
  const GenerationPlacement p = place_generation(f, budget, "--device-memory-gb", "test");
  ASSERT_TRUE(p.streamed);
  EXPECT_LE(p.device_bytes, budget);
  exec::StandInOptions stand_in;
  stand_in.capacity_bytes = budget;
  exec::StandInDevice device(stand_in);
  models::CausalLM model = io::load_hf_model(dir, DType::F32);
  exec::StreamedWeights streamed(model, device, p.layout);
  options.streamed = &streamed;
  const std::vector<Generation> got = generate(model, prompts, options);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << i;
  EXPECT_LE(device.memory().stats().peak_bytes, budget);
}

}  // namespace
}  // namespace lt::train
