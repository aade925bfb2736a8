// config.json of what a run or `lazytrain convert` writes is the source
// model's config.json with only the weights' dtype changed: fields this
// program does not read (initializer_range, attention_dropout, use_cache,
// a custom key) and ones it would write otherwise (qwen2's
// max_window_layers, which a config rebuilt from ModelConfig set to the
// layer count) reach transformers as the source has them. Compared with
// the source file as parsed JSON, field by field; the saved folders still
// load, and a checkpoint still resumes.
#include <gtest/gtest.h>

#include <cstdio>

#include "io/hf_model.h"
#include "train/trained_template.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class CheckpointConfig : public ::testing::Test {
 protected:
  // The qwen2 fixture (2 layers, weights in f32) with a config.json that
  // says bfloat16 and holds a key of its own.
  CheckpointConfig() : tmp_("checkpoint_config") {
    fs::create_directories(model());
    for (const char* file : {"model.safetensors", "generation_config.json"})
      fs::copy_file(fixture("qwen2") / file, model() / file);
    nlohmann::json config = nlohmann::json::parse(read_text(fixture("qwen2") / "config.json"));
    config["dtype"] = "bfloat16";
    config["attention_dropout"] = 0.125;
    config["initializer_range"] = 0.0375;
    config["max_window_layers"] = 21;
    config["use_cache"] = false;
    config["my_lab_note"] = {{"trained_by", "lazytrain test"}, {"rounds", {1, 2, 3}}};
    write_text(model() / "config.json", config.dump(2));
    write_random_tokens(tmp_ / "data.jsonl", 8, 97, 5);
  }

  fs::path model() const { return tmp_ / "model"; }

  // The fields of `saved` are those of `source`, each with its value, but
  // the dtype (under the source's own key), which is `dtype`.
  static void expect_source_kept(const fs::path& saved_config, const fs::path& source_config,
                                 const std::string& dtype_key, const std::string& dtype) {
    SCOPED_TRACE(saved_config.string());
    const nlohmann::json source = nlohmann::json::parse(read_text(source_config));
    const nlohmann::json saved = nlohmann::json::parse(read_text(saved_config));
    for (const auto& [key, value] : source.items()) {
      ASSERT_TRUE(saved.contains(key)) << key << " was dropped";
      if (key != dtype_key) {
        EXPECT_EQ(saved.at(key), value) << key;
      }
    }
    for (const auto& [key, value] : saved.items())
      EXPECT_TRUE(source.contains(key)) << key << " was added";
    EXPECT_EQ(saved.at(dtype_key), dtype);
  }

  TempDir tmp_;
};

TEST_F(CheckpointConfig, ACheckpointKeepsTheSourceConfigAndStillLoadsAndResumes) {
  train_quietly(fixture_config(model(), tmp_ / "data.jsonl", tmp_ / "out", {"train.steps=2"}));
  const fs::path step2 = tmp_ / "out" / "step-2";
  expect_source_kept(step2 / "config.json", model() / "config.json", "dtype", "float32");
  // The folder loads as the model it was trained from, in f32.
  const models::CausalLM saved = io::load_hf_model(step2);
  models::ModelConfig want = io::load_hf_model(model()).config();
  want.torch_dtype = "float32";
  EXPECT_EQ(saved.config(), want);

  // A resume reads it and saves the same config again.
  train_quietly(fixture_config(model(), tmp_ / "data.jsonl", tmp_ / "out", {"train.steps=4"}),
                step2.string());
  expect_source_kept(tmp_ / "out" / "step-4" / "config.json", model() / "config.json", "dtype",
                     "float32");
  EXPECT_EQ(read_metrics(tmp_ / "out").size(), 4u);

  // Stages on disk write the checkpoint a stage at a time, config included.
  train_quietly(
      fixture_config(model(), tmp_ / "data.jsonl", tmp_ / "disk",
                     {"train.steps=1", "exec.mode=streaming", "exec.state_placement=disk"}));
  expect_source_kept(tmp_ / "disk" / "step-1" / "config.json", model() / "config.json", "dtype",
                     "float32");
}

// A model made from config.json alone (random weights) keeps that config
// too, under the transformers 4.x key torch_dtype when the file has it.
TEST_F(CheckpointConfig, ARandomInitKeepsItsConfig) {
  const fs::path bare = tmp_ / "bare";
  fs::create_directories(bare);
  nlohmann::json config = nlohmann::json::parse(read_text(model() / "config.json"));
  config.erase("dtype");
  config["torch_dtype"] = "float16";
  write_text(bare / "config.json", config.dump(2));
  train_quietly(fixture_config(bare, tmp_ / "data.jsonl", tmp_ / "random",
                               {"train.steps=1", "model.init=random"}));
  const fs::path step1 = tmp_ / "random" / "step-1";
  expect_source_kept(step1 / "config.json", bare / "config.json", "torch_dtype", "float32");
  EXPECT_NO_THROW(io::load_hf_model(step1));
}

TEST_F(CheckpointConfig, ConvertKeepsTheSourceConfig) {
  const fs::path out = tmp_ / "f16";
  const std::string cmd = program().string() + " convert --dtype f16 --model " + model().string() +
                          " --out " + out.string() + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string log;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) log.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << log;
  expect_source_kept(out / "config.json", model() / "config.json", "dtype", "float16");
  models::ModelConfig want = io::load_hf_model(model()).config();
  want.torch_dtype = "float16";
  EXPECT_EQ(io::load_hf_model(out).config(), want);
}

// A checkpoint converted keeps its train_config.yaml, so generate and eval
// still take the template it was trained with (they fell back to the
// tokenizer's own).
TEST_F(CheckpointConfig, ConvertKeepsTheTrainedTemplateRecord) {
  std::string output;
  ASSERT_EQ(run_program({"train", "--no-sample", "--set", "train.steps=1", "--set",
                         "out.dir=" + (tmp_ / "run").string()},
                        tmp_ / "train.log", &output),
            0)
      << output;
  const fs::path step1 = tmp_ / "run" / "step-1";
  ASSERT_EQ(run_program({"convert", "--dtype", "bf16", "--model", step1.string(), "--out",
                         (tmp_ / "bf16").string()},
                        tmp_ / "convert.log", &output),
            0)
      << output;
  EXPECT_EQ(read_text(tmp_ / "bf16" / "train_config.yaml"), read_text(step1 / "train_config.yaml"));
  const PromptTemplate trained = prompt_template(step1.string(), "", "generate");
  const PromptTemplate converted = prompt_template((tmp_ / "bf16").string(), "", "generate");
  EXPECT_EQ(converted.name, trained.name);
  EXPECT_NE(converted.note.find("trained with"), std::string::npos) << converted.note;
}

}  // namespace
}  // namespace lt::train::testing
