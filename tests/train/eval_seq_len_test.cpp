// `lazytrain eval --seq-len` on rows whose response lies past it: they are
// cut as train.seq_len cuts them and keep nothing to score, so eval says
// so (as train does), counts only the rows it scored, and its loss is the
// loss of those rows alone. Data of which no row keeps a token to predict
// is refused naming the file and --seq-len.
#include <gtest/gtest.h>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

// The embedded demo after one step: a model folder with its tokenizer
// (max_position_embeddings 128) that reads question -> answer rows.
fs::path demo_checkpoint(const TempDir& tmp) {
  std::string output;
  EXPECT_EQ(run_program({"train", "--no-sample", "--set", "train.steps=1", "--set",
                         "train.eval_every=0", "--set", "out.dir=" + (tmp / "run").string()},
                        tmp / "train.log", &output),
            0)
      << output;
  return tmp / "run" / "step-1";
}

// Rows whose prompt repeats a sentence `repeats` times: at 20 the prompt
// alone is over 128 tokens, at 1 the whole row is short.
std::string rows(int count, int repeats) {
  std::string prompt, text;
  for (int i = 0; i < repeats; ++i) prompt += "Kim has 12 shells. ";
  for (int i = 0; i < count; ++i) {
    text += "{\"question\": \"" + prompt + "How many?\", \"answer\": \"#### " + std::to_string(i) +
            "\"}\n";
  }
  return text;
}

nlohmann::json json_line(const std::string& output) {
  return nlohmann::json::parse(output.substr(output.rfind("{\"")));
}

TEST(EvalSeqLen, RowsLeftNothingToScoreAreCountedAndLeftOut) {
  TempDir tmp("eval_seq_len");
  const fs::path model = demo_checkpoint(tmp);
  const fs::path mixed = tmp / "mixed.jsonl", short_only = tmp / "short.jsonl";
  write_text(mixed, rows(17, 20) + rows(3, 1));
  write_text(short_only, rows(3, 1));
  const std::vector<std::string> eval = {"eval", "--model", model.string(), "--seq-len", "128"};

  std::string output;
  auto with = [&](std::vector<std::string> args, const fs::path& data) {
    args.insert(args.begin(), eval.begin(), eval.end());
    args.insert(args.end(), {"--data", data.string()});
    return args;
  };
  ASSERT_EQ(run_program(with({}, mixed), tmp / "text.log", &output), 0) << output;
  EXPECT_NE(output.find("eval: 17 of 20 rows of " + mixed.string() +
                        " are longer than --seq-len 128 and were cut; 17 of them keep no "
                        "scored token"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("(3 of 20 rows; the other 17 have no token to predict)"), std::string::npos)
      << output;

  ASSERT_EQ(run_program(with({"--json"}, mixed), tmp / "mixed.log", &output), 0) << output;
  const nlohmann::json got = json_line(output);
  EXPECT_EQ(got.at("rows"), 3);
  EXPECT_EQ(got.at("rows_read"), 20);
  EXPECT_EQ(got.at("rows_cut"), 17);
  // The rows left out add nothing: the loss and tokens of the 3 short
  // rows evaluated alone.
  ASSERT_EQ(run_program(with({"--json"}, short_only), tmp / "short.log", &output), 0) << output;
  const nlohmann::json alone = json_line(output);
  EXPECT_EQ(alone.at("rows"), 3);
  EXPECT_EQ(alone.at("rows_read"), 3);
  EXPECT_EQ(got.at("tokens"), alone.at("tokens"));
  EXPECT_NEAR(got.at("loss").get<double>(), alone.at("loss").get<double>(), 1e-9);
  // One row left out: "the other has" (it printed "the other 1 have").
  const fs::path one_long = tmp / "one_long.jsonl";
  write_text(one_long, rows(1, 20) + rows(3, 1));
  ASSERT_EQ(run_program(with({}, one_long), tmp / "one.log", &output), 0) << output;
  EXPECT_NE(output.find("(3 of 4 rows; the other has no token to predict)"), std::string::npos)
      << output;
}

TEST(EvalSeqLen, NoRowWithATokenWithinItIsRefusedNamingTheFile) {
  TempDir tmp("eval_seq_len_none");
  const fs::path model = demo_checkpoint(tmp);
  const fs::path data = tmp / "rows.jsonl";
  write_text(data, rows(2, 1));
  std::string output;
  EXPECT_EQ(
      run_program({"eval", "--model", model.string(), "--data", data.string(), "--seq-len", "8"},
                  tmp / "eval.log", &output),
      1);
  EXPECT_NE(output.find(data.string() + ": no row keeps a token to predict within --seq-len 8 (2 "
                                        "of 2 rows are longer and were cut"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("nothing to evaluate; raise --seq-len"), std::string::npos) << output;
}

}  // namespace
}  // namespace lt::train::testing
