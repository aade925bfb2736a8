// adamw8bit against adamw through the trainer on assets/demo/gsm8k.yaml's
// data, tokenizer, learning rate and schedule (the demo's before it was the
// addition task), with a smaller model of that config's kind (issue 18): GPT-2's 50257-token
// vocabulary in a tied embedding (1.61M of the 1.62M parameters, the only tensor in 8 bits), hidden
// 32, one layer, 128 tokens a step, 200 steps. The embedding is what broke: the rows of tokens the
// batches never hold share 2048-element blocks with frequent tokens' rows, and
// get gradients 1e-4 .. 1e-7 times as large (adamw8bit_kernel.h, "Note [the
// second moment is stored as sqrt(v)]"). With v itself in 8 bits this test saw a loss
// of 81 and a last-5 mean of 10.75 against adamw's 6.35; with sqrt(v), 6.32.
// The demo itself (bench/adamw8bit_demo.sh, bench/RESULTS.md) went 6.99 against
// 5.88. The two runs take ~60 s of CPU time (~30 s on two idle cores).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/train_helpers.h"

namespace lt::optim {
namespace {

using namespace lt::train::testing;

void write_small_demo_model(const fs::path& dir) {
  fs::create_directories(dir);
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                                 {"model_type", "llama"},
                                 {"hidden_size", 32},
                                 {"intermediate_size", 64},
                                 {"num_hidden_layers", 1},
                                 {"num_attention_heads", 2},
                                 {"num_key_value_heads", 1},
                                 {"head_dim", 16},
                                 {"vocab_size", 50257},
                                 {"max_position_embeddings", 64},
                                 {"rope_theta", 10000.0},
                                 {"rms_norm_eps", 1e-5},
                                 {"tie_word_embeddings", true},
                                 {"hidden_act", "silu"},
                                 {"bos_token_id", 50256},
                                 {"eos_token_id", 50256},
                                 {"torch_dtype", "float32"}};
  std::ofstream(dir / "config.json") << config.dump(2);
}

TEST(AdamW8bitLargeVocabulary, DemoDataFor200StepsEndsWithinTwoPercentOfAdamWWithoutSpikes) {
  TempDir tmp("adamw8bit_vocab");
  write_small_demo_model(tmp / "model");
  auto run = [&](const std::string& optimizer) {
    // assets/demo/gsm8k.yaml (lr 3e-3, cosine, warmup 6, seed 0) with
    // the small model and shorter batches.
    const std::vector<std::string> overrides = {"model.path=" + (tmp / "model").string(),
                                                "model.init=random",
                                                "train.device=cpu",
                                                "train.seq_len=32",
                                                "train.batch_size=4",
                                                "train.steps=200",
                                                "train.save_every=0",
                                                "optim.name=" + optimizer,
                                                "out.dir=" + (tmp / optimizer).string()};
    const auto result = train_quietly(
        train::load_train_config((train::assets_dir() / "demo/gsm8k.yaml").string(), overrides));
    EXPECT_EQ(result.steps_done, 200);
    return field(read_metrics(tmp / optimizer), "loss");
  };
  const std::vector<double> fp32 = run("adamw");
  const std::vector<double> q8 = run("adamw8bit");
  ASSERT_EQ(fp32.size(), 200u);
  ASSERT_EQ(q8.size(), 200u);
  auto last5 = [](const std::vector<double>& x) {
    double s = 0;
    for (size_t i = x.size() - 5; i < x.size(); ++i) s += x[i];
    return s / 5;
  };
  const double a = last5(fp32), b = last5(q8);
  const double worst_a = *std::max_element(fp32.begin(), fp32.end());
  const double worst_b = *std::max_element(q8.begin(), q8.end());
  std::printf("last-5 mean adamw %.4f adamw8bit %.4f (%+.2f%%); worst loss %.3f vs %.3f\n", a, b,
              100 * (b / a - 1), worst_a, worst_b);
  // It learned (ln 50257 = 10.8 at the start), so 2% is a real margin.
  EXPECT_LT(a, 0.7 * fp32.front());
  EXPECT_NEAR(b, a, 0.02 * a);
  // Both runs' worst loss is the first steps' ~10.85 (identical there up to
  // rounding); a spike is several units above it.
  EXPECT_LE(worst_b, worst_a + 0.01);
}

}  // namespace
}  // namespace lt::optim
