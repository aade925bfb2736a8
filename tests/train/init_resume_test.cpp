// How a run starts (issue 18): model.init auto loads a folder's weights
// also when the config is the embedded demo with overrides; a resume
// without a config continues on the checkpoint's own config; a checkpoint
// carries the chat template and generation settings.
#include <gtest/gtest.h>

#include <cstring>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

class StartAndResume : public ::testing::Test {
 protected:
  StartAndResume() : tmp_("init_resume") { write_random_tokens(tmp_ / "data.jsonl", 12, 97, 9); }
  // `lazytrain train` with no config: the demo's keys under these overrides.
  std::vector<std::string> demo_args(const fs::path& model, const fs::path& out,
                                     const std::vector<std::string>& more = {}) const {
    std::vector<std::string> args = {"train", "--no-sample",
                                     "--set", "model.path=" + model.string(),
                                     "--set", "data.path=" + (tmp_ / "data.jsonl").string(),
                                     "--set", "data.format=tokens",
                                     "--set", "train.device=cpu",
                                     "--set", "train.seq_len=32",
                                     "--set", "out.dir=" + out.string()};
    for (const auto& m : more) {
      args.push_back("--set");
      args.push_back(m);
    }
    return args;
  }
  int run(const std::vector<std::string>& args, std::string* output) {
    return run_program(args, tmp_ / ("run" + std::to_string(runs_++) + ".log"), output, 120);
  }
  TempDir tmp_;
  int runs_ = 0;
};

// The first loss of a fine-tuning run configured by overrides alone is the
// pretrained model's, exactly as with model.init pretrained, and the run
// says where its weights came from.
TEST_F(StartAndResume, OverridesAloneFineTuneTheFoldersWeights) {
  std::string auto_out, pretrained_out;
  ASSERT_EQ(run(demo_args(fixture("llama"), tmp_ / "auto", {"train.steps=1"}), &auto_out), 0)
      << auto_out;
  ASSERT_EQ(
      run(demo_args(fixture("llama"), tmp_ / "pre", {"train.steps=1", "model.init=pretrained"}),
          &pretrained_out),
      0)
      << pretrained_out;
  const double a = read_metrics(tmp_ / "auto").at(0).at("loss").get<double>();
  const double p = read_metrics(tmp_ / "pre").at(0).at("loss").get<double>();
  EXPECT_EQ(bits(a), bits(p)) << a << " vs " << p;
  EXPECT_MENTIONS(auto_out, "weights: ");
  EXPECT_MENTIONS(auto_out, " tensors loaded from " + fixture("llama").string());
}

// A folder holding config.json alone trains from random weights under auto
// (saying so), and is refused under pretrained, naming the folder.
TEST_F(StartAndResume, AFolderWithoutWeightsIsRandomUnderAutoAndRefusedUnderPretrained) {
  const fs::path bare = tmp_ / "bare";
  fs::create_directories(bare);
  fs::copy_file(fixture("llama") / "config.json", bare / "config.json");
  std::string output;
  ASSERT_EQ(run(demo_args(bare, tmp_ / "r", {"train.steps=1"}), &output), 0) << output;
  EXPECT_MENTIONS(output, "weights: random");
  EXPECT_MENTIONS(output, bare.string() + " has no safetensors");
  EXPECT_NE(run(demo_args(bare, tmp_ / "p", {"train.steps=1", "model.init=pretrained"}), &output),
            0);
  EXPECT_MENTIONS(output, "model.init: pretrained");
  EXPECT_MENTIONS(output, bare.string());
}

// A folder whose weights this program does not read (PyTorch's .bin, or
// safetensors shards without their index) is refused under auto, naming
// the file, not trained from random weights; `eval` says the same.
TEST_F(StartAndResume, AFolderWithWeightsItCannotReadIsRefusedNotRandom) {
  for (const auto& [file, why] :
       {std::pair<std::string, std::string>{"pytorch_model.bin", "PyTorch's pickled weights"},
        {"model-00001-of-00002.safetensors", "no model.safetensors.index.json lists the shards"}}) {
    SCOPED_TRACE(file);
    const fs::path folder = tmp_ / ("other_" + file);
    fs::create_directories(folder);
    fs::copy_file(fixture("llama") / "config.json", folder / "config.json");
    write_text(folder / file, "not read");
    std::string output;
    EXPECT_NE(run(demo_args(folder, tmp_ / "o", {"train.steps=1"}), &output), 0);
    EXPECT_MENTIONS(output, "model.path '" + folder.string() + "' holds " + file);
    EXPECT_MENTIONS(output, why);
    EXPECT_MENTIONS(output, "model.init: random");
    EXPECT_EQ(output.find("weights: random"), std::string::npos) << output;
    // Asked for by name, random it is.
    ASSERT_EQ(run(demo_args(folder, tmp_ / ("r_" + file), {"train.steps=1", "model.init=random"}),
                  &output),
              0)
        << output;
    EXPECT_MENTIONS(output, "weights: random");
    EXPECT_NE(
        run_program({"eval", "--model", folder.string(), "--data", (tmp_ / "data.jsonl").string()},
                    tmp_ / "eval.log", &output),
        0);
    EXPECT_MENTIONS(output, "; it holds " + file);
  }
}

// `--resume DIR` without a config continues on the checkpoint's config:
// the losses are bitwise those of an uninterrupted run of that config.
TEST_F(StartAndResume, AResumeWithoutAConfigContinuesOnTheCheckpointsConfig) {
  const std::vector<std::string> keys = {"optim.lr=2e-3", "train.batch_size=4",
                                         "train.save_every=2", "train.grad_clip=0.5"};
  const TrainConfig full =
      fixture_config(fixture("llama"), tmp_ / "data.jsonl", tmp_ / "full", [&] {
        auto k = keys;
        k.push_back("train.steps=4");
        return k;
      }());
  // Both runs are the program's (its BLAS threading differs from a test
  // process's, and with it the last bits).
  const fs::path yaml = tmp_ / "first.yaml";
  write_text(yaml, full.to_yaml());
  std::string output;
  ASSERT_EQ(run({"train", yaml.string(), "--no-sample"}, &output), 0) << output;
  ASSERT_EQ(run({"train", yaml.string(), "--no-sample", "--set", "train.steps=2", "--set",
                 "out.dir=" + (tmp_ / "first").string()},
                &output),
            0)
      << output;
  ASSERT_EQ(run({"train", "--no-sample", "--resume", (tmp_ / "first" / "step-2").string(), "--set",
                 "train.steps=4"},
                &output),
            0)
      << output;
  const auto a = read_metrics(tmp_ / "full");
  const auto b = read_metrics(tmp_ / "first");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    for (const char* key : {"loss", "lr", "grad_norm"}) {
      EXPECT_EQ(bits(a[i].at(key).get<double>()), bits(b[i].at(key).get<double>()))
          << key << " of step " << i;
    }
  }
  // `--resume ''` is an error, not a fresh run.
  EXPECT_NE(run({"train", "--no-sample", "--resume", ""}, &output), 0);
  EXPECT_MENTIONS(output, "--resume");
}

// Changing the optimizer on resume is allowed, with a warning naming the
// change; the new optimizer's states start from zero (an adamw8bit
// checkpoint resumed as adamw, and back).
TEST_F(StartAndResume, ChangingTheOptimizerOnResumeWarnsAndStartsItsStatesFresh) {
  const TrainConfig c =
      fixture_config(fixture("llama"), tmp_ / "data.jsonl", tmp_ / "q8",
                     {"optim.name=adamw8bit", "optim.min_8bit_numel=64", "train.steps=1"});
  train_quietly(c);
  std::string output;
  ASSERT_EQ(run({"train", "--no-sample", "--resume", (tmp_ / "q8" / "step-1").string(), "--set",
                 "train.steps=2"},
                &output),
            0)
      << output;
  ASSERT_EQ(run({"train", "--no-sample", "--resume", (tmp_ / "q8" / "step-2").string(), "--set",
                 "train.steps=3", "--set", "optim.name=adamw", "--set", "optim.lr=1e-4"},
                &output),
            0)
      << output;
  EXPECT_MENTIONS(output, "optim.name: adamw8bit -> adamw");
  EXPECT_MENTIONS(output, "optim.lr: 0.001 -> 0.0001");
  EXPECT_MENTIONS(output, "states start from zero");
  EXPECT_EQ(read_metrics(tmp_ / "q8").size(), 3u);
}

// A checkpoint carries the chat template (transformers 5 keeps it in
// chat_template.jinja) and generation_config.json, byte for byte.
TEST_F(StartAndResume, CheckpointsCarryTheTemplateAndGenerationFiles) {
  const fs::path model = tmp_ / "model";
  fs::create_directories(model);
  for (const auto& entry : fs::directory_iterator(fixture("llama")))
    fs::copy_file(entry.path(), model / entry.path().filename());
  const std::string jinja = "{% for m in messages %}{{ m['content'] }}{% endfor %}";
  write_text(model / "chat_template.jinja", jinja);
  train_quietly(fixture_config(model, tmp_ / "data.jsonl", tmp_ / "ck", {"train.steps=1"}));
  EXPECT_EQ(read_text(tmp_ / "ck" / "step-1" / "chat_template.jinja"), jinja);
  EXPECT_EQ(read_text(tmp_ / "ck" / "step-1" / "generation_config.json"),
            read_text(model / "generation_config.json"));
}

}  // namespace
}  // namespace lt::train::testing
