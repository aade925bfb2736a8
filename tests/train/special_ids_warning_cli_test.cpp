// Every command that runs the model with a tokenizer (train, eval,
// generate) says when config.json's eos_token_id names no token of it
// (Note [Special ids no token has]): the llama fixture with Qwen3's eos
// 151645 and a 28-token tokenizer ran without a word, and generation never
// stopped at an end of sequence. It is a warning: the command still runs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/fixture_tokenizers.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class SpecialIdsWarning : public ::testing::Test {
 protected:
  SpecialIdsWarning() : tmp_("special_ids_warning") {
    model_ = lt::testing::copy_of_llama(tmp_ / "model");
    nlohmann::json config = nlohmann::json::parse(read_text(model_ / "config.json"));
    config["eos_token_id"] = 151645;
    write_text(model_ / "config.json", config.dump());
    // <unk>, the letters at 1 to 26, <|endoftext|> at 27: 28 ids.
    fs::create_directories(tmp_ / "tokenizer");
    lt::testing::write_letters_tokenizer(tmp_ / "tokenizer", 27);
    write_text(tmp_ / "text.jsonl", "{\"text\": \"abc\"}\n{\"text\": \"hello\"}\n");
  }

  std::string warning() const {
    return "warning: " + (model_ / "config.json").string() +
           ": eos_token_id 151645 names no token of " +
           (tmp_ / "tokenizer" / "tokenizer.json").string() +
           " (28 ids, 0 to 27): the tokenizer is probably another model's.";
  }

  // `lazytrain ARGS --model <model> --tokenizer <tokenizer>`: the exit
  // code; the output in `*output`.
  int run(std::vector<std::string> args, std::string* output) {
    args.insert(args.end(),
                {"--model", model_.string(), "--tokenizer", (tmp_ / "tokenizer").string()});
    return run_program(args, tmp_ / "run.log", output);
  }

  TempDir tmp_;
  fs::path model_;
};

TEST_F(SpecialIdsWarning, TrainEvalAndGenerateSayIt) {
  std::string output;
  std::vector<std::string> train = {"train", "--no-sample"};
  for (const std::string& s :
       {"model.path=" + model_.string(), std::string("model.init=pretrained"),
        "data.path=" + (tmp_ / "text.jsonl").string(), std::string("data.format=text"),
        "data.tokenizer=" + (tmp_ / "tokenizer").string(), std::string("train.steps=1"),
        std::string("train.batch_size=2"), std::string("train.seq_len=16"),
        std::string("train.device=cpu"), std::string("train.save_every=0"),
        "out.dir=" + (tmp_ / "out").string()})
    train.insert(train.end(), {"--set", s});
  ASSERT_EQ(run_program(train, tmp_ / "train.log", &output), 0) << output;
  EXPECT_MENTIONS(output, warning());

  ASSERT_EQ(run({"eval", "--data", (tmp_ / "text.jsonl").string(), "--format", "text"}, &output), 0)
      << output;
  EXPECT_MENTIONS(output, warning());

  ASSERT_EQ(run({"generate", "--prompt", "abc", "--max-new-tokens", "2"}, &output), 0) << output;
  EXPECT_MENTIONS(output, warning());
}

}  // namespace
}  // namespace lt::train::testing
