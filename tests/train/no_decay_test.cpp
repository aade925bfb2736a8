// optim.no_decay matches the checkpoint's (Hugging Face) parameter names
// as well as lazytrain's: GPT-2's "ln_" keeps its layer norms from weight
// decay. Against AdamW's decoupled decay worked by hand: after one step,
// a parameter kept from decay differs from the decayed run's by exactly
// lr * weight_decay * its starting value; every other parameter is equal.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "io/hf_model.h"
#include "models/hf_mapping.h"
#include "train/no_decay.h"
#include "train/run_plan.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

std::map<std::string, Tensor> weights_of(const fs::path& folder) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : io::load_hf_model(folder).parameters()) out[name] = t.contiguous();
  return out;
}

TEST(NoDecay, ThePatternsMatchTheCheckpointsNamesToo) {
  const auto gpt2 = models::ModelConfig::from_file(fixture("gpt2") / "config.json");
  const NoDecay ln = resolve_no_decay(gpt2, {"ln_", "absent"});
  EXPECT_EQ(ln.unmatched, std::vector<std::string>{"absent"});
  // transformer.h.0.ln_1.weight is lazytrain's block.0.input_norm.weight.
  EXPECT_NE(std::find(ln.substrings.begin(), ln.substrings.end(), "block.0.input_norm.weight"),
            ln.substrings.end());
  // "norm" holds lazytrain's names alone, and adds none.
  EXPECT_EQ(resolve_no_decay(gpt2, {"norm"}).substrings, std::vector<std::string>{"norm"});
  EXPECT_TRUE(resolve_no_decay(gpt2, {"norm"}).unmatched.empty());
}

TEST(NoDecay, Gpt2LayerNormsByTheirCheckpointNamesAreNotDecayed) {
  TempDir tmp("no_decay");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const double lr = 1e-3, wd = 0.1;
  const auto run = [&](const std::string& out, std::vector<std::string> no_decay) {
    TrainConfig c = fixture_config(fixture("gpt2"), tmp / "data.jsonl", tmp / out,
                                   {"train.steps=1", fmt::format("optim.lr={}", lr),
                                    fmt::format("optim.weight_decay={}", wd)});
    c.optim.no_decay = std::move(no_decay);
    return weights_of(train_quietly(c).last_checkpoint);
  };
  const auto decayed = run("decayed", {});
  const auto kept = run("kept", {"ln_"});
  const auto start = weights_of(fixture("gpt2"));
  const auto gpt2 = models::ModelConfig::from_file(fixture("gpt2") / "config.json");
  std::map<std::string, bool> layer_norm;
  for (const models::HfRule& rule : models::hf_rules(gpt2))
    for (const std::string& internal : rule.internal)
      layer_norm[internal] = rule.hf_name.find("ln_") != std::string::npos;
  int64_t layer_norms = 0;
  for (const auto& [name, w0] : start) {
    SCOPED_TRACE(name);
    const float* a = kept.at(name).data<float>();
    const float* b = decayed.at(name).data<float>();
    const float* s = w0.data<float>();
    for (int64_t i = 0; i < w0.numel(); ++i) {
      if (layer_norm.at(name))
        ASSERT_NEAR(a[i] - b[i], lr * wd * s[i], 1e-6) << i;
      else
        ASSERT_EQ(a[i], b[i]) << i;
    }
    layer_norms += layer_norm.at(name) ? 1 : 0;
  }
  EXPECT_GT(layer_norms, 0);
}

// A pattern the user wrote that matches nothing is said in the plan, with
// the two namings (the default [bias, norm] is not: most models have no
// bias).
TEST(NoDecay, APatternMatchingNothingIsWarnedAbout) {
  TempDir tmp("no_decay_warn");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const TrainConfig c = fixture_config(fixture("gpt2"), tmp / "data.jsonl", tmp / "out",
                                       {"optim.no_decay=[bias, layernorm]"});
  const auto gpt2 = models::ModelConfig::from_file(fixture("gpt2") / "config.json");
  std::string said;
  for (const std::string& line : resolve_run(c, gpt2).reasons) said += line + "\n";
  EXPECT_NE(said.find("warning: optim.no_decay: layernorm matches no parameter name of this "
                      "model, as the checkpoint names them (e.g. transformer.h.0.ln_1.weight) "
                      "or as lazytrain does (e.g. block.0.input_norm.weight), so it keeps from "
                      "weight decay nothing"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("bias"), std::string::npos) << said;
  EXPECT_EQ(said.find("anyway"), std::string::npos) << said;
  // With no weight decay at all the name is still a likely typo, and the
  // warning says what holds.
  said.clear();
  TrainConfig no_decay = c;
  no_decay.optim.weight_decay = 0;
  for (const std::string& line : resolve_run(no_decay, gpt2).reasons) said += line + "\n";
  EXPECT_NE(said.find("so it keeps from weight decay nothing (a likely typo; with "
                      "optim.weight_decay 0 nothing decays in this run anyway)"),
            std::string::npos)
      << said;
}

// A resume reads every key from the checkpoint's train_config.yaml, the
// default optim.no_decay among them: not warned of as if the user wrote it
// (the demo's resume warned that "bias" matched nothing).
TEST(NoDecay, TheDefaultReadBackAtAResumeIsNotWarnedAbout) {
  TempDir tmp("no_decay_resume");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  // fixture_config decays every parameter: the default set back, as the
  // demo runs with it.
  train_quietly(
      fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "out",
                     {"train.steps=2", "train.save_every=2", "optim.no_decay=[bias, norm]"}));
  const std::string latest = "latest";
  const TrainConfig resumed =
      load_train_config_for("", {"train.steps=4", "out.dir=" + (tmp / "out").string()}, &latest);
  ASSERT_GT(resumed.key_origins.count("optim.no_decay"), 0u);
  const auto llama = models::ModelConfig::from_file(fixture("llama") / "config.json");
  for (const std::string& line : resolve_run(resumed, llama).reasons)
    EXPECT_EQ(line.find("optim.no_decay"), std::string::npos) << line;
}

}  // namespace
}  // namespace lt::train::testing
