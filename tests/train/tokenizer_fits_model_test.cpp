// `train`, `eval` and `generate` check at start that the tokenizer fits the
// model's embedding (config.json's vocab_size 97 for the llama fixture):
//  - a vocabulary with ids past the rows (Qwen3's tokenizer, 151669 ids) is
//    not the model's: refused, naming both files and both numbers, before
//    any data is read. It used to fail only at the first text holding such
//    an id, or (generate on token-id prompts) to decode the model's ids
//    with it, silently;
//  - added tokens alone past the rows (a <pad> at 97) are a warning: the
//    command runs as before on texts that do not hold them;
//  - fewer ids than rows (a padded vocabulary) pass without a word.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/fixture_tokenizers.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

using lt::testing::qwen3_tokenizer_dir;
using lt::testing::write_letters_tokenizer;

// The start of the refusal of Qwen3's tokenizer for the llama fixture.
std::string qwen3_refusal() {
  return (qwen3_tokenizer_dir() / "tokenizer.json").string() +
         ": the tokenizer's largest token id is 151668, but " +
         (fixture("llama") / "config.json").string() + " has vocab_size 97";
}

// The start of the warning for the letters tokenizer's <pad> at 97.
std::string pad_warning(const fs::path& tokenizer_dir) {
  return "warning: " + (tokenizer_dir / "tokenizer.json").string() +
         ": the added token <pad> (id 97) has no embedding row: " +
         (fixture("llama") / "config.json").string() + " has vocab_size 97";
}

class TokenizerFitsModel : public ::testing::Test {
 protected:
  TokenizerFitsModel() : tmp_("tokenizer_fits_model") {
    // Letters only: ids 1 to 26 of every tokenizer below.
    write_text(tmp_ / "text.jsonl", "{\"text\": \"abc\"}\n{\"text\": \"hello\"}\n");
    // <|endoftext|> at 27: 28 ids for 97 rows, as a padded vocabulary.
    fs::create_directories(tmp_ / "fits");
    write_letters_tokenizer(tmp_ / "fits", 27);
    // The same with an added <pad> at 97, one past the last row.
    fs::create_directories(tmp_ / "pad");
    write_letters_tokenizer(tmp_ / "pad", 27, 97);
  }

  // `lazytrain ARGS --model <llama> --tokenizer DIR`: the exit code, the
  // output (stdout and stderr) in `*output`.
  int run(std::vector<std::string> args, const fs::path& tokenizer, std::string* output) {
    args.insert(args.end(),
                {"--model", fixture("llama").string(), "--tokenizer", tokenizer.string()});
    return run_program(args, tmp_ / "run.log", output);
  }

  // `lazytrain train` of the llama fixture on text.jsonl (format text) with
  // data.tokenizer DIR; `sample`: the greedy sample at the end too.
  int train(const fs::path& tokenizer, std::string* output, bool sample = false) {
    std::vector<std::string> args = {"train"};
    if (!sample) args.push_back("--no-sample");
    for (const std::string& s :
         {"model.path=" + fixture("llama").string(), std::string("model.init=pretrained"),
          "data.path=" + (tmp_ / "text.jsonl").string(), std::string("data.format=text"),
          "data.tokenizer=" + tokenizer.string(), std::string("train.steps=1"),
          std::string("train.batch_size=2"), std::string("train.seq_len=16"),
          std::string("train.device=cpu"), std::string("train.save_every=0"),
          "out.dir=" + (tmp_ / "out").string(), std::string("out.overwrite=true")})
      args.insert(args.end(), {"--set", s});
    return run_program(args, tmp_ / "train.log", output);
  }

  TempDir tmp_;
};

TEST_F(TokenizerFitsModel, TrainRefusesAnotherModelsTokenizerBeforeReadingTheData) {
  std::string output;
  EXPECT_EQ(train(qwen3_tokenizer_dir(), &output), 1);
  EXPECT_MENTIONS(output, qwen3_refusal());
  // At start: before the data is read (its "data: N samples" line).
  EXPECT_EQ(output.find("\ndata: "), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(tmp_ / "out" / "metrics.jsonl"));

  ASSERT_EQ(train(tmp_ / "pad", &output), 0) << output;
  EXPECT_MENTIONS(output, pad_warning(tmp_ / "pad"));
  EXPECT_EQ(count_lines(tmp_ / "out" / "metrics.jsonl"), 1u);

  ASSERT_EQ(train(tmp_ / "fits", &output), 0) << output;
  EXPECT_EQ(output.find("embedding row"), std::string::npos) << output;
}

// The run's closing greedy sample decodes as generate does: an id of a
// padded vocabulary's rows (28 to 96 here, most of the fixture's ids) has
// no text and decodes to nothing, as in transformers. It failed the run
// ("cannot decode token id"), exit 1 after the save.
TEST_F(TokenizerFitsModel, TheEndOfRunSampleDecodesAPaddedVocabularysIdsToNothing) {
  std::string output;
  ASSERT_EQ(train(tmp_ / "fits", &output, /*sample=*/true), 0) << output;
  EXPECT_MENTIONS(output, "sample (greedy, 40 tokens at most)");
  EXPECT_EQ(output.find("cannot decode"), std::string::npos) << output;
}

TEST_F(TokenizerFitsModel, EvalRefusesAnotherModelsTokenizer) {
  std::string output;
  EXPECT_EQ(run({"eval", "--data", (tmp_ / "text.jsonl").string(), "--format", "text"},
                qwen3_tokenizer_dir(), &output),
            1);
  EXPECT_MENTIONS(output, qwen3_refusal());
  // --task math loads the model and tokenizer as generate does.
  write_text(tmp_ / "math.jsonl", "{\"question\": \"ab\", \"answer\": \"c\"}\n");
  EXPECT_EQ(run({"eval", "--task", "math", "--data", (tmp_ / "math.jsonl").string()},
                qwen3_tokenizer_dir(), &output),
            1);
  EXPECT_MENTIONS(output, qwen3_refusal());

  ASSERT_EQ(run({"eval", "--data", (tmp_ / "text.jsonl").string(), "--format", "text", "--json"},
                tmp_ / "pad", &output),
            0)
      << output;
  EXPECT_MENTIONS(output, pad_warning(tmp_ / "pad"));
  EXPECT_MENTIONS(output, "\"loss\":");

  ASSERT_EQ(run({"eval", "--data", (tmp_ / "text.jsonl").string(), "--format", "text"},
                tmp_ / "fits", &output),
            0)
      << output;
  EXPECT_EQ(output.find("embedding row"), std::string::npos) << output;
}

// Token-id prompts need no tokenizer, but one given decodes the answers:
// Qwen3's turned the model's ids into another model's text, silently.
TEST_F(TokenizerFitsModel, GenerateRefusesAnotherModelsTokenizer) {
  write_text(tmp_ / "ids.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  std::string output;
  EXPECT_EQ(run({"generate", "--data", (tmp_ / "ids.jsonl").string(), "--max-new-tokens", "4"},
                qwen3_tokenizer_dir(), &output),
            1);
  EXPECT_MENTIONS(output, qwen3_refusal());
  EXPECT_EQ(
      run({"generate", "--prompt", "abc", "--max-new-tokens", "4"}, qwen3_tokenizer_dir(), &output),
      1);
  EXPECT_MENTIONS(output, qwen3_refusal());

  ASSERT_EQ(run({"generate", "--prompt", "abc", "--max-new-tokens", "4", "--json"}, tmp_ / "pad",
                &output),
            0)
      << output;
  EXPECT_MENTIONS(output, pad_warning(tmp_ / "pad"));
  EXPECT_MENTIONS(output, "\"output_ids\":");

  ASSERT_EQ(run({"generate", "--prompt", "abc", "--max-new-tokens", "4"}, tmp_ / "fits", &output),
            0)
      << output;
  EXPECT_EQ(output.find("embedding row"), std::string::npos) << output;
}

}  // namespace
}  // namespace lt::train::testing
