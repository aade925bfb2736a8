// data.format auto in `train` tells the format from the file, as `eval`
// does, before it looks for a tokenizer: token-id rows train with a model
// folder that has none, as under data.format tokens; text rows still need
// one, and the error names the file and what it read as.
#include <gtest/gtest.h>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class FormatDetection : public ::testing::Test {
 protected:
  FormatDetection() : tmp_("format_detection") {
    write_random_tokens(tmp_ / "train.jsonl", 8, 97, 3);
    write_random_tokens(tmp_ / "heldout.jsonl", 3, 97, 4);
  }
  // `lazytrain train` on the llama fixture (no tokenizer in its folder)
  // with `sets` on top; the exit code, the output in `*output`.
  int train(const std::string& name, const std::vector<std::string>& sets, std::string* output) {
    std::vector<std::string> args = {"train", "--no-sample"};
    for (const std::string& s :
         {"model.path=" + fixture("llama").string(), std::string("model.init=pretrained"),
          "data.path=" + (tmp_ / "train.jsonl").string(), std::string("train.steps=2"),
          std::string("train.seq_len=16"), std::string("train.device=cpu"),
          std::string("train.save_every=0"), "out.dir=" + (tmp_ / name).string()})
      args.insert(args.end(), {"--set", s});
    for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
    return run_program(args, tmp_ / (name + ".log"), output);
  }
  TempDir tmp_;
};

// The same run as under data.format tokens: the same losses, and the same
// eval_loss of data.eval_path (also told by auto).
TEST_F(FormatDetection, TokenRowsTrainWithoutATokenizer) {
  const std::vector<std::string> evaluated = {"data.eval_path=" + (tmp_ / "heldout.jsonl").string(),
                                              "train.eval_every=2"};
  std::string output;
  std::vector<std::string> sets = evaluated;
  sets.push_back("data.format=auto");
  ASSERT_EQ(train("auto", sets, &output), 0) << output;
  EXPECT_NE(output.find("(format tokens)"), std::string::npos) << output;
  sets.back() = "data.format=tokens";
  ASSERT_EQ(train("tokens", sets, &output), 0) << output;
  const auto detected = read_metrics(tmp_ / "auto"), told = read_metrics(tmp_ / "tokens");
  ASSERT_EQ(detected.size(), 2u);
  ASSERT_EQ(told.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(detected[i].at("loss"), told[i].at("loss")) << "step " << i + 1;
  ASSERT_TRUE(detected[1].contains("eval_loss")) << detected[1].dump();
  EXPECT_EQ(detected[1].at("eval_loss"), told[1].at("eval_loss"));
}

TEST_F(FormatDetection, TextRowsStillNeedOneAndTheErrorSaysWhatTheFileReadAs) {
  const fs::path text = tmp_ / "alpaca.jsonl";
  write_text(text, "{\"instruction\": \"Add 2 and 3.\", \"output\": \"5\"}\n");
  std::string output;
  EXPECT_EQ(train("text", {"data.format=auto", "data.path=" + text.string()}, &output), 1);
  EXPECT_NE(output.find("data.format auto (" + text.string() +
                        " reads as alpaca) needs a tokenizer, read from model.path"),
            std::string::npos)
      << output;
  // The same for data.eval_path, the training rows being token ids.
  EXPECT_EQ(train("eval_text", {"data.format=auto", "data.eval_path=" + text.string()}, &output),
            1);
  EXPECT_NE(
      output.find("data.format auto (" + text.string() + " reads as alpaca) needs a tokenizer"),
      std::string::npos)
      << output;
  EXPECT_FALSE(fs::exists(tmp_ / "text" / "metrics.jsonl"));
}

// A folder that has a tokenizer still lends it to token-id rows under
// auto: the run ends with its greedy sample, decoded.
TEST_F(FormatDetection, TokenRowsStillReadATokenizerThereIsForTheSample) {
  std::string output;
  ASSERT_EQ(run_program({"train", "--no-sample", "--set", "train.steps=1", "--set",
                         "train.eval_every=0", "--set", "out.dir=" + (tmp_ / "demo").string()},
                        tmp_ / "demo.log", &output),
            0)
      << output;
  const fs::path model = tmp_ / "demo" / "step-1";  // the demo's model, with its tokenizer.json
  ASSERT_EQ(
      run_program({"train", "--set", "model.path=" + model.string(), "--set",
                   "data.path=" + (tmp_ / "train.jsonl").string(), "--set", "data.format=auto",
                   "--set", "train.steps=1", "--set", "train.seq_len=16", "--set",
                   "train.device=cpu", "--set", "out.dir=" + (tmp_ / "sampled").string()},
                  tmp_ / "sampled.log", &output),
      0)
      << output;
  EXPECT_NE(output.find("(format tokens)"), std::string::npos) << output;
  EXPECT_NE(output.find("sample (greedy, 40 tokens at most)"), std::string::npos) << output;
}

}  // namespace
}  // namespace lt::train::testing
