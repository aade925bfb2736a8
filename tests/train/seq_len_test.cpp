// train.seq_len against the data and the model: rows it cuts are counted
// and said, rows it leaves nothing to train on are said, a run whose rows
// all keep nothing is refused, a step with nothing to train claims no
// throughput, a length past the model's context is refused (train, plan),
// and a dataset smaller than a batch says that each step repeats rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "support/errors.h"
#include "train/run_setup.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

// A row of `length` tokens whose first `masked` labels are -100 (a prompt).
struct Row {
  int64_t length, masked;
};

void write_rows(const fs::path& path, const std::vector<Row>& rows) {
  std::vector<std::vector<int64_t>> ids, labels;
  for (const Row& r : rows) {
    std::vector<int64_t> row, lab;
    for (int64_t i = 0; i < r.length; ++i) {
      row.push_back(1 + (i * 7 + r.length) % 90);  // inside the fixture's vocabulary of 97
      lab.push_back(i < r.masked ? -100 : row.back());
    }
    ids.push_back(row);
    labels.push_back(lab);
  }
  write_tokens_jsonl(path, ids, labels);
}

// Runs `config` in this process; returns what it printed on stderr.
std::string train_and_capture(const TrainConfig& config) {
  ::testing::internal::CaptureStderr();
  try {
    train_quietly(config);
  } catch (...) {
    ::testing::internal::GetCapturedStderr();
    throw;
  }
  return ::testing::internal::GetCapturedStderr();
}

// seq_len 8, padded: a row keeps its first 8 tokens, whose targets are
// labels 1..7. By hand, per row: cut? targets kept (tokens kept):
//   {5, 0}:  no,  4 (5)      {12, 10}: yes, 0      {12, 4}: yes, 4 (8)
//   {10, 9}: yes, 0          {8, 7}:   no,  1 (8)  {9, 8}:  yes, 0
// So 4 of 6 rows are cut and 3 of them keep no trained token.
const std::vector<Row> kMixedRows = {{5, 0}, {12, 10}, {12, 4}, {10, 9}, {8, 7}, {9, 8}};

TEST(SeqLen, TrainSaysWhichRowsItCutsAndAStepWithoutTargetsClaimsNoThroughput) {
  TempDir tmp("seq_len_cut");
  const fs::path data = tmp / "rows.jsonl";
  write_rows(data, kMixedRows);
  // One row a step, one epoch: every row is a step of its own.
  const std::string err =
      train_and_capture(fixture_config(fixture("llama"), data, tmp / "out",
                                       {"train.seq_len=8", "train.batch_size=1", "train.steps=6"}));
  EXPECT_MENTIONS(err, "data: 4 of 6 rows of " + data.string() +
                           " are longer than train.seq_len 8 and were cut; 3 of them keep no "
                           "trained token (all of theirs lie past token 8); 1 of them loses part "
                           "of its trained tokens (those past token 8): raise train.seq_len (the "
                           "longest row, line 2, has 12 tokens)");
  EXPECT_MENTIONS(err, "no row of its batch keeps a trained token within train.seq_len 8");
  EXPECT_MENTIONS(err, "loss - | 0 tok/s");

  // Each step's (tokens, targets) is its row's, by hand above; the three
  // rows without a target compute nothing, so they process no tokens.
  const auto lines = read_metrics(tmp / "out");
  ASSERT_EQ(lines.size(), 6u);
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const auto& line : lines) {
    got.emplace_back(line.at("tokens").get<int64_t>(), line.at("target_count").get<int64_t>());
    if (line.at("target_count").get<int64_t>() == 0) {
      EXPECT_TRUE(line.at("loss").is_null()) << line.dump();  // not a loss of 0
      EXPECT_EQ(line.at("tokens_per_s").get<double>(), 0.0) << line.dump();
      EXPECT_EQ(line.at("tflops").get<double>(), 0.0) << line.dump();
    } else {
      EXPECT_GT(line.at("tokens_per_s").get<double>(), 0.0) << line.dump();
    }
  }
  std::sort(got.begin(), got.end());
  const std::vector<std::pair<int64_t, int64_t>> expected = {{0, 0}, {0, 0}, {0, 0},
                                                             {5, 4}, {8, 1}, {8, 4}};
  EXPECT_EQ(got, expected);
}

// Rows whose trained tokens straddle train.seq_len lose their end (padded
// rows keep labels 1..seq_len - 1 as targets): counted, for training rows
// and evaluation rows alike. By hand at seq_len 8:
//   {12, 4}: keeps labels 4..7, loses 8..11      {9, 0}: loses label 8
//   {10, 0} masked past 5: cut, loses no trained label
//   {6, 0}: not cut
TEST(SeqLen, RowsThatLosePartOfTheirTrainedTokensAreCounted) {
  TempDir tmp("seq_len_straddle");
  const fs::path data = tmp / "rows.jsonl";
  std::vector<std::vector<int64_t>> ids = {{}, {}, {}, {}}, labels = {{}, {}, {}, {}};
  const int64_t lengths[] = {12, 9, 10, 6};
  for (size_t r = 0; r < 4; ++r) {
    for (int64_t i = 0; i < lengths[r]; ++i) {
      ids[r].push_back(1 + i);
      const bool trained = r == 0 ? i >= 4 : r == 2 ? i <= 5 : true;
      labels[r].push_back(trained ? 1 + i : -100);
    }
  }
  write_tokens_jsonl(data, ids, labels);
  const TrainConfig c =
      fixture_config(fixture("llama"), data, tmp / "out",
                     {"train.seq_len=8", "train.eval_every=1", "data.eval_path=" + data.string()});
  ::testing::internal::CaptureStderr();
  {
    ProgressBar log(0, 1);
    load_training_data(c, nullptr, &log);
  }
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(said, "data: 3 of 4 rows of " + data.string() +
                            " are longer than train.seq_len 8 and were cut; 2 of them lose part "
                            "of their trained tokens (those past token 8): raise train.seq_len "
                            "(the longest row, line 1, has 12 tokens)");
  EXPECT_MENTIONS(said, "data: 3 of 4 rows of " + data.string() +
                            " are longer than train.seq_len 8 and were cut; 2 of them lose part "
                            "of their scored tokens (those past token 8): raise train.seq_len");
}

// A row's first token is predicted by none: a one-token row, or one whose
// only label != -100 is its first, trains nothing at any length. Said when
// some rows are so; when all are, the refusal says so (it told the user to
// raise train.seq_len, of rows none of which was cut).
TEST(SeqLen, RowsWithNothingPastTheirFirstTokenAreNamedNotBlamedOnSeqLen) {
  TempDir tmp("seq_len_first_token");
  const fs::path none = tmp / "none.jsonl";
  write_tokens_jsonl(none, {{5}, {7, 8, 9}}, {{5}, {7, -100, -100}});
  const std::string e = lt::testing::error_of([&] {
    train_quietly(fixture_config(fixture("llama"), none, tmp / "out", {"train.steps=1"}));
  });
  EXPECT_MENTIONS(e, none.string() +
                         ": no row has a token to train on: 2 of 2 rows have no "
                         "trained token after their first (labels != -100 past "
                         "position 0; a row's first token is never predicted)");
  EXPECT_EQ(e.find("raise train.seq_len"), std::string::npos) << e;
  const fs::path some = tmp / "some.jsonl";
  write_tokens_jsonl(some, {{5}, {7, 8, 9}}, {{5}, {7, 8, 9}});
  const std::string said =
      train_and_capture(fixture_config(fixture("llama"), some, tmp / "some", {"train.steps=1"}));
  EXPECT_MENTIONS(said, "data: " + some.string() +
                            ": 1 of 2 rows has no trained token after its first (labels != -100 "
                            "past position 0; a row's first token is never predicted); their "
                            "steps train on the other rows");
}

// A row longer than the model's context (the fixture's 64 positions)
// cannot be kept whole at any train.seq_len the run takes: the advice to
// raise it stops there, and names the row's line (it suggested 80); at the
// context, it is to shorten, split or pack the rows.
TEST(SeqLen, TheAdviceToRaiseSeqLenStopsAtTheModelsContext) {
  TempDir tmp("seq_len_context");
  const fs::path data = tmp / "rows.jsonl";
  write_rows(data, {{5, 0}, {80, 40}, {20, 0}});
  const std::string err = train_and_capture(
      fixture_config(fixture("llama"), data, tmp / "out", {"train.seq_len=32", "train.steps=1"}));
  EXPECT_MENTIONS(err,
                  "raise train.seq_len, up to the model's context of 64 tokens "
                  "(max_position_embeddings) (the longest row, line 2, has 80 tokens); rows "
                  "longer than that must be shortened or split, or train packed (data.pack: "
                  "true)");
  // At the context already, raising it is no advice.
  const std::string at_context = train_and_capture(
      fixture_config(fixture("llama"), data, tmp / "at", {"train.seq_len=64", "train.steps=1"}));
  EXPECT_MENTIONS(at_context,
                  "train.seq_len is the model's context already (64 tokens, "
                  "max_position_embeddings): shorten or split the longer rows, or "
                  "train packed (data.pack: true) (the longest row, line 2, has 80 "
                  "tokens)");
  // Within the context, no bound is said.
  write_rows(data, {{5, 0}, {60, 40}});
  const std::string within = train_and_capture(
      fixture_config(fixture("llama"), data, tmp / "in", {"train.seq_len=32", "train.steps=1"}));
  EXPECT_MENTIONS(within, "raise train.seq_len (the longest row, line 2, has 60 tokens)\n");
}

TEST(SeqLen, RowsThatAllKeepNoTrainedTokenAreRefusedUnlessPacked) {
  TempDir tmp("seq_len_nothing");
  const fs::path data = tmp / "rows.jsonl";
  // Every row's first trained label is at index 8 or later: cut at 8,
  // none is left a target.
  write_rows(data, {{12, 10}, {10, 9}, {9, 8}});
  const std::string e = lt::testing::error_of([&] {
    train_quietly(
        fixture_config(fixture("llama"), data, tmp / "out", {"train.seq_len=8", "train.steps=1"}));
  });
  EXPECT_MENTIONS(e, data.string() + ": no row keeps a trained token");
  EXPECT_MENTIONS(e,
                  "within train.seq_len 8 (3 of 3 rows are longer and were cut; the longest, "
                  "line 1, has 12 tokens)");
  EXPECT_MENTIONS(e, "raise train.seq_len");
  // Packed, a long row goes on in the next row: its answer is trained.
  std::string err;
  ASSERT_NO_THROW(err = train_and_capture(
                      fixture_config(fixture("llama"), data, tmp / "packed",
                                     {"train.seq_len=8", "train.steps=1", "data.pack=true"})));
  EXPECT_EQ(err.find("were cut"), std::string::npos) << err;
  EXPECT_GT(read_metrics(tmp / "packed").at(0).at("target_count").get<int64_t>(), 0);
}

TEST(SeqLen, ALengthPastTheModelsContextIsRefusedByTrainAndPlan) {
  TempDir tmp("seq_len_context");
  write_random_tokens(tmp / "rows.jsonl", 4, 97, 1);
  const fs::path config_json = fixture("llama") / "config.json";
  const int64_t context =
      nlohmann::json::parse(read_text(config_json)).at("max_position_embeddings").get<int64_t>();
  const std::string too_long = std::to_string(context + 1);
  const std::string e = lt::testing::error_of([&] {
    train_quietly(fixture_config(fixture("llama"), tmp / "rows.jsonl", tmp / "out",
                                 {"train.seq_len=" + too_long, "train.steps=1"}));
  });
  EXPECT_MENTIONS(e, "config key 'train.seq_len' " + too_long +
                         " is longer than the model's context: " + config_json.string() +
                         " has max_position_embeddings " + std::to_string(context));
  // Where it was set, and what would run.
  EXPECT_MENTIONS(e, "--set train.seq_len=" + too_long + ": config key");
  EXPECT_MENTIONS(e, "(set it to at most " + std::to_string(context) +
                         ", e.g. --set train.seq_len=" + std::to_string(context) + ")");
  // Left at its default (512, past this model's 64), it runs at the
  // model's context, saying so.
  TrainConfig by_default = load_train_config(
      "", {"model.path=" + fixture("llama").string(), "data.path=" + (tmp / "rows.jsonl").string(),
           "train.steps=1", "out.dir=" + (tmp / "default").string()});
  ASSERT_GT(by_default.train.seq_len, context);
  const std::string said = train_and_capture(by_default);
  EXPECT_MENTIONS(said, "train.seq_len " + std::to_string(by_default.train.seq_len) +
                            " (the default) is past the model's context of " +
                            std::to_string(context) + " tokens");
  EXPECT_MENTIONS(read_text(tmp / "default" / "config.yaml"),
                  "seq_len: " + std::to_string(context));
  // The whole context is allowed.
  EXPECT_NO_THROW(
      train_quietly(fixture_config(fixture("llama"), tmp / "rows.jsonl", tmp / "full",
                                   {"train.seq_len=" + std::to_string(context), "train.steps=1"})));

  std::string out;
  EXPECT_NE(run_program({"plan", "--model", fixture("llama").string(), "--seq-len", "100000"},
                        tmp / "plan.log", &out),
            0);
  EXPECT_MENTIONS(out,
                  "--seq-len 100000 is longer than the model's context: " + config_json.string() +
                      " has max_position_embeddings " + std::to_string(context));
  // A --batch-size of 0 given is refused, not taken for "search".
  EXPECT_NE(run_program({"plan", "--model", fixture("llama").string(), "--batch-size", "0"},
                        tmp / "plan0.log", &out),
            0);
  EXPECT_MENTIONS(out, "--batch-size must be a number of sequences");
  // Without --seq-len, plan takes the model's context when it is under 1024.
  ASSERT_EQ(run_program({"plan", "--model", fixture("llama").string(), "--batch-size", "4",
                         "--time-limit", "5", "--json"},
                        tmp / "plan_default.log", &out),
            0)
      << out;
  const auto plan =
      nlohmann::json::parse(out.substr(out.find('{'), out.rfind('}') - out.find('{') + 1));
  EXPECT_EQ(plan.at("seq_len").get<int64_t>(), context);
}

// Dropout rates in config.json are named, as this program trains without
// them; rates of 0 and other keys are not.
TEST(ModelNotes, DropoutInTheConfigIsSaidNotApplied) {
  TempDir tmp("dropout_note");
  nlohmann::json config = nlohmann::json::parse(read_text(fixture("llama") / "config.json"));
  config["attention_dropout"] = 0.0;
  write_text(tmp / "config.json", config.dump());
  EXPECT_EQ(dropout_not_applied((tmp / "config.json").string()), "");
  config["attn_pdrop"] = 0.1;
  config["resid_pdrop"] = 0.1;
  write_text(tmp / "config.json", config.dump());
  EXPECT_EQ(dropout_not_applied((tmp / "config.json").string()),
            "note: " + (tmp / "config.json").string() +
                " sets attn_pdrop 0.1, resid_pdrop 0.1; this program trains without dropout");
}

TEST(SeqLen, ADatasetSmallerThanABatchSaysEachStepRepeatsRows) {
  TempDir tmp("seq_len_small");
  const fs::path data = tmp / "rows.jsonl";
  // 5 rows of 3 tokens: 5 padded rows, or 15 tokens packed into 2 rows of 8.
  write_rows(data, {{3, 0}, {3, 0}, {3, 0}, {3, 0}, {3, 0}});
  const auto run = [&](const std::string& name, const std::vector<std::string>& keys) {
    std::vector<std::string> all = {"train.seq_len=8", "train.steps=1"};
    all.insert(all.end(), keys.begin(), keys.end());
    return train_and_capture(fixture_config(fixture("llama"), data, tmp / name, all));
  };
  EXPECT_MENTIONS(run("six", {"train.batch_size=6"}),
                  "data: the training data makes 5 rows, fewer than train.batch_size 6: each step "
                  "repeats rows");
  EXPECT_EQ(run("four", {"train.batch_size=4"}).find("each step repeats rows"), std::string::npos);
  EXPECT_MENTIONS(run("packed", {"train.batch_size=4", "data.pack=true"}),
                  "data: the training data makes 2 rows packed to train.seq_len 8, fewer than "
                  "train.batch_size 4: each step repeats rows");
}

// The context refusal names the key config.json holds (GPT-2's n_positions),
// or that it holds none and the length is the family's default: it said the
// file "has max_position_embeddings 2048" of a file without the key.
TEST(SeqLen, TheContextRefusalSaysWhereTheLengthCameFrom) {
  TempDir tmp("seq_len_context_key");
  std::string out;
  EXPECT_NE(run_program({"plan", "--model", fixture("gpt2").string(), "--seq-len", "65"},
                        tmp / "gpt2.log", &out),
            0);
  EXPECT_MENTIONS(out, "--seq-len 65 is longer than the model's context: " +
                           (fixture("gpt2") / "config.json").string() + " has n_positions 64");
  const fs::path bare = tmp / "llama";
  fs::create_directories(bare);
  nlohmann::json config = nlohmann::json::parse(read_text(fixture("llama") / "config.json"));
  config.erase("max_position_embeddings");
  write_text(bare / "config.json", config.dump(2));
  // transformers' LlamaConfig default, 2048.
  EXPECT_NE(
      run_program({"plan", "--model", bare.string(), "--seq-len", "2049"}, tmp / "llama.log", &out),
      0);
  EXPECT_MENTIONS(
      out, "--seq-len 2049 is longer than the model's context: " + (bare / "config.json").string() +
               " has no max_position_embeddings, so the context is 2048, llama's "
               "default as transformers reads it");
}

}  // namespace
}  // namespace lt::train::testing
