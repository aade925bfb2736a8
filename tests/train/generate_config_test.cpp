// What generate reads beside the model, as a new user's trial met it:
// generation_config.json's keys it does not apply are said (transformers'
// generate() applies them), a malformed file names its line, a --tools
// object without "tools" says so, a checkpoint's train_config.yaml naming
// no chat template is named, and --max-new-tokens near INT64_MAX runs to the
// context (the cache's size wrapped negative).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "io/hf_model.h"
#include "support/cli_run.h"
#include "support/errors.h"
#include "train/generation.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

using lt::testing::CliResult;
using lt::testing::run_lazytrain;

class GenerateConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::copy(fixture("llama"), model_, fs::copy_options::recursive);
    write_text(tmp_ / "ids.jsonl", "{\"input_ids\": [5, 9, 11]}\n");
  }
  CliResult generate(const std::string& args) {
    return run_lazytrain("generate --model " + model_.string() + " --data " +
                             (tmp_ / "ids.jsonl").string() + " " + args,
                         tmp_ / "stderr.txt");
  }
  void write_generation_config(const std::string& text) {
    write_text(model_ / "generation_config.json", text);
  }

  TempDir tmp_{"generate_config"};
  const fs::path model_ = tmp_ / "model";
};

TEST_F(GenerateConfig, KeysItDoesNotApplyAreSaid) {
  write_generation_config(
      R"({"eos_token_id": 2, "repetition_penalty": 1.3, "max_new_tokens": 7, "num_beams": 1})");
  CliResult r = generate("--max-new-tokens 3");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_MENTIONS(r.err, "generate: note: " + model_.string() +
                             "'s generation_config.json sets repetition_penalty 1.3, which this "
                             "command does not apply; generate has no repetition penalty, beam "
                             "search or minimum length: its outputs differ from transformers' "
                             "there");
  r = generate("");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_MENTIONS(r.err,
                  "sets max_new_tokens 7, repetition_penalty 1.3, which this command does "
                  "not apply; give --max-new-tokens 7 for its length (the default here is "
                  "256)");
  // Values that do nothing say nothing.
  write_generation_config(R"({"eos_token_id": 2, "repetition_penalty": 1.0, "num_beams": 1})");
  r = generate("");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("does not apply"), std::string::npos) << r.err;
}

TEST_F(GenerateConfig, AMalformedFileNamesItsLine) {
  write_generation_config("{\n  \"eos_token_id\": 2,\n  \"do_sample\": tru}\n");
  const CliResult r = generate("");
  EXPECT_EQ(r.status, 1);
  EXPECT_MENTIONS(r.err, (model_ / "generation_config.json").string() + ": not valid JSON (");
  EXPECT_MENTIONS(r.err, "at line 3");
}

TEST_F(GenerateConfig, AToolsObjectWithoutToolsSaysSo) {
  write_text(tmp_ / "tools.json", R"({"foo": 1})");
  const CliResult r = run_lazytrain("generate --model " + model_.string() +
                                        " --prompt hi --tools " + (tmp_ / "tools.json").string(),
                                    tmp_ / "stderr.txt");
  EXPECT_EQ(r.status, 1);
  EXPECT_MENTIONS(r.err, "--tools " + (tmp_ / "tools.json").string() +
                             ": expected a list of tools, or an object with a \"tools\" list; "
                             "found an object without \"tools\"");
}

TEST_F(GenerateConfig, ACheckpointsUnknownTemplateNamesItsRecord) {
  write_text(model_ / "train_config.yaml", "data:\n  template: bogus\n");
  const CliResult r = generate("");
  EXPECT_EQ(r.status, 1);
  EXPECT_MENTIONS(r.err, (model_ / "train_config.yaml").string() +
                             ": data.template is \"bogus\", not a chat template (auto, chatml, "
                             "qwen3, llama3 or plain); give --template to choose one");
}

// The largest --max-new-tokens: the row runs as the library makes it with
// max_new_tokens = the context (64), which no row can pass.
TEST_F(GenerateConfig, TheLargestMaxNewTokensRunsToTheContext) {
  const CliResult r = generate("--json --max-new-tokens 9223372036854775807");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json row = nlohmann::json::parse(r.out.substr(0, r.out.find('\n')));
  GenerationOptions options;
  options.max_new_tokens = 64;
  options.eos_ids = {2};
  const std::vector<Generation> want =
      train::generate(io::load_hf_model(fixture("llama"), DType::F32), {{5, 9, 11}}, options);
  EXPECT_EQ(row.at("output_ids").get<std::vector<int32_t>>(), want[0].tokens);
  EXPECT_EQ(row.at("finish"), finish_reason_name(want[0].finish));
}

}  // namespace
}  // namespace lt::train::testing
