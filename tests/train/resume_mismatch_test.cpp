// A resume continues the checkpoint's weights with its token ids: another
// tokenizer or another model shape is refused (it trained a Qwen model on
// a toy tokenizer's ids, logging loss 0); a tokenizer named as a file
// travels with the checkpoint; a resume with nothing left to train says so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/json_fields.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

using ::testing::HasSubstr;

class ResumeMismatch : public ::testing::Test {
 protected:
  ResumeMismatch() : tmp_("resume_mismatch") {
    write_random_tokens(tmp_ / "data.jsonl", 8, 97, 5);
    // Two tokenizer files that differ (by a trailing newline) and sit beside
    // their folder's tokenizer_config.json.
    const fs::path qwen3 = fs::path(LT_SOURCE_DIR) / "tests/data/fixtures/qwen3";
    for (const char* dir : {"tok_a", "tok_b"}) {
      fs::create_directories(tmp_ / dir);
      fs::copy_file(qwen3 / "tokenizer_config.json", tmp_ / dir / "tokenizer_config.json");
    }
    fs::copy_file(qwen3 / "tokenizer.json", tmp_ / "tok_a" / "my_tokenizer.json");
    fs::copy_file(qwen3 / "tokenizer.json", tmp_ / "tok_b" / "my_tokenizer.json");
    std::ofstream(tmp_ / "tok_b" / "my_tokenizer.json", std::ios::app) << "\n";
    // Beside the named file, a tokenizer.json of the folder's own, another
    // one: the checkpoint took it in place of the file named.
    fs::copy_file(qwen3 / "tokenizer.json", tmp_ / "tok_a" / "tokenizer.json");
    std::ofstream(tmp_ / "tok_a" / "tokenizer.json", std::ios::app) << "\n\n";
  }
  TrainConfig config(const std::string& tokenizer_dir, const std::vector<std::string>& more = {},
                     const std::string& family = "llama") {
    std::vector<std::string> overrides = {
        "data.tokenizer=" + (tmp_ / tokenizer_dir / "my_tokenizer.json").string(),
        "train.save_every=2"};
    overrides.insert(overrides.end(), more.begin(), more.end());
    return fixture_config(fixture(family), tmp_ / "data.jsonl", tmp_ / "out", overrides);
  }
  TempDir tmp_;
};

TEST_F(ResumeMismatch, AnotherTokenizerOrModelIsRefusedAndTheTokenizerFileTravels) {
  train_quietly(config("tok_a", {"train.steps=2"}));
  const fs::path step2 = tmp_ / "out" / "step-2";
  // The file data.tokenizer named is the checkpoint's tokenizer.json, with
  // its folder's tokenizer_config.json.
  ASSERT_TRUE(fs::is_regular_file(step2 / "tokenizer.json"));
  EXPECT_EQ(data::read_whole_file((step2 / "tokenizer.json").string()),
            data::read_whole_file((tmp_ / "tok_a" / "my_tokenizer.json").string()));
  EXPECT_TRUE(fs::is_regular_file(step2 / "tokenizer_config.json"));

  EXPECT_THAT(training_error(config("tok_b", {"train.steps=4"}), "latest"),
              HasSubstr("is not the one the checkpoint was trained with"));
  const std::string other_model =
      training_error(config("tok_a", {"train.steps=4"}, "gpt2"), "latest");
  EXPECT_THAT(other_model, HasSubstr("is another model than the checkpoint's"));
  EXPECT_THAT(other_model, HasSubstr("model_type gpt2 against llama"));
  EXPECT_THAT(other_model, HasSubstr("model.path: " + step2.string() + ", no --resume"));
  // Only the fields that differ are named (the message listed sizes that
  // were equal, "hidden 32 against 32"), tie_word_embeddings among them.
  const fs::path tied = tmp_ / "tied";
  fs::copy(fixture("llama"), tied);
  auto tied_config = nlohmann::json::parse(read_text(tied / "config.json"));
  tied_config["tie_word_embeddings"] = true;
  write_text(tied / "config.json", tied_config.dump());
  TrainConfig tied_run = config("tok_a", {"train.steps=4"});
  tied_run.model.path = tied.string();
  const std::string tied_error = training_error(tied_run, "latest");
  EXPECT_THAT(tied_error, HasSubstr("(its config.json against the checkpoint's: "
                                    "tie_word_embeddings true against false)"));
  EXPECT_FALSE(fs::exists(tmp_ / "out" / "step-4"));
  // The same tokenizer and model resume.
  EXPECT_EQ(train_quietly(config("tok_a", {"train.steps=4"}), "latest").steps_done, 4);
  // Another folder of the same shape is let through, and the run says its
  // weights are not what trains (it read as a switch of model).
  const fs::path same = tmp_ / "same_shape";
  fs::copy(fixture("llama"), same);
  TrainConfig same_run = config("tok_a", {"train.steps=6"});
  same_run.model.path = same.string();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(train_quietly(same_run, "latest").steps_done, 6);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("model.path gives no weights to a resume")) << log;
}

}  // namespace
}  // namespace lt::train::testing
