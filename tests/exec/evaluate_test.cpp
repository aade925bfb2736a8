// `eval`: batching with padding against one row at a time, and the command's
// handling of good and bad input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include <regex>

#include "autograd/grad_mode.h"
#include "data/byte_level.h"
#include "exec/evaluate.h"
#include "io/hf_model.h"
#include "support/byte_level_tokenizer.h"

namespace lt {
namespace {

const std::filesystem::path kLlama =
    std::filesystem::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/llama";

TEST(Evaluate, PaddedBatchesEqualRowByRowMeans) {
  models::CausalLM model = io::load_hf_model(kLlama);
  std::vector<data::TokenRow> rows = {
      {5, 9, 13, 2, 7, 1}, {3, 3}, {96, 0, 45, 12}, {8}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  // Reference: each row alone (no padding), summed token losses.
  NoGradGuard no_grad;
  double sum = 0;
  int64_t tokens = 0;
  for (const auto& r : rows) {
    if (r.size() < 2) continue;
    std::vector<int64_t> ids(r.begin(), r.end());
    Tensor t = Tensor::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
    Tensor targets = models::shift_targets(t);
    sum += model.loss(t, targets, 1.0).item();
    tokens += static_cast<int64_t>(r.size()) - 1;
  }
  for (int64_t batch : {1, 2, 3, 8}) {
    exec::EvalResult res = exec::evaluate_loss(model, rows, batch);
    EXPECT_EQ(res.tokens, tokens);
    EXPECT_NEAR(res.loss, sum / static_cast<double>(tokens), 1e-5) << "batch " << batch;
  }
}

// The stage-by-stage walk (for weights on disk, exec/staged_states.h)
// against evaluate_samples: the same loss bit for bit, in one group of
// batches or in a group per batch (an activation cap below one batch),
// each group bringing every stage in once, in order.
TEST(Evaluate, ByStageEqualsTheWholeModelBitForBit) {
  models::CausalLM model = io::load_hf_model(kLlama);
  std::vector<data::Sample> samples;
  for (int r = 0; r < 7; ++r) {
    std::vector<int32_t> ids;
    for (int j = 0; j < 5 + 3 * r; ++j) ids.push_back((r * 31 + j * 7) % 97);
    samples.push_back({ids, ids, r});
  }
  const exec::EvalResult whole = exec::evaluate_samples(model, samples, 3, 12);
  const size_t stages = model.stages().size();
  for (int64_t cap : {int64_t{1} << 30, int64_t{1}}) {
    std::vector<size_t> brought;
    const exec::EvalResult staged = exec::evaluate_samples_by_stage(
        model, samples, 3, 12,
        [&](size_t s) {
          brought.push_back(s);
          return std::shared_ptr<void>();
        },
        cap);
    EXPECT_EQ(staged.loss, whole.loss) << cap;
    EXPECT_EQ(staged.tokens, whole.tokens) << cap;
    const size_t groups = cap == 1 ? 3 : 1;  // 7 rows in batches of 3
    ASSERT_EQ(brought.size(), groups * stages) << cap;
    for (size_t k = 0; k < brought.size(); ++k) EXPECT_EQ(brought[k], k % stages) << cap;
  }
}

// `prefix` goes before the program (limits such as "ulimit -v N; ").
std::string run_cli(const std::string& args, int* status, const std::string& prefix = "") {
  const std::string cmd = prefix + std::string(LT_BINARY_DIR) + "/lazytrain " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

class EvalCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("lt_eval_cli_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  std::filesystem::path dir_;
};

TEST_F(EvalCommand, PrintsOneJsonLineWithLossAndTokens) {
  auto data = write("ok.jsonl", "{\"input_ids\": [5, 9, 13, 2]}\n\n{\"input_ids\": [3, 3, 4]}\n");
  int status = 0;
  std::string out = run_cli(
      "eval --model " + kLlama.string() + " --data " + data.string() + " --batch-size 2 --json",
      &status);
  ASSERT_EQ(status, 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["tokens"].get<int64_t>(), 5);
  EXPECT_GT(j["loss"].get<double>(), 0.0);
}

TEST_F(EvalCommand, BadInputNamesTheFileLineAndField) {
  int status = 0;
  auto bad_json = write("bad.jsonl", "{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, 2\n");
  std::string out =
      run_cli("eval --model " + kLlama.string() + " --data " + bad_json.string(), &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("bad.jsonl:2"), std::string::npos) << out;

  auto bad_id = write("id.jsonl", "{\"input_ids\": [1, 97]}\n");
  out = run_cli("eval --model " + kLlama.string() + " --data " + bad_id.string(), &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("id.jsonl:1"), std::string::npos) << out;
  EXPECT_NE(out.find("input_ids[1] = 97"), std::string::npos) << out;

  // With the default --format auto, the fields that would tell a format;
  // with --format tokens, the one field it needs.
  auto no_field = write("field.jsonl", "{\"ids\": [1, 2]}\n");
  out = run_cli("eval --model " + kLlama.string() + " --data " + no_field.string(), &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("field.jsonl:1"), std::string::npos) << out;
  EXPECT_NE(out.find("[ids]; expected input_ids"), std::string::npos) << out;
  out = run_cli("eval --format tokens --model " + kLlama.string() + " --data " + no_field.string(),
                &status);
  EXPECT_NE(out.find("\"input_ids\""), std::string::npos) << out;

  out = run_cli("eval --model " + (dir_ / "missing").string() + " --data " + bad_id.string(),
                &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("missing"), std::string::npos) << out;
}

TEST_F(EvalCommand, ConvertWritesAFolderThatEvaluatesTheSame) {
  int status = 0;
  auto data = write("ok.jsonl", "{\"input_ids\": [5, 9, 13, 2, 40, 41]}\n");
  std::string before =
      run_cli("eval --json --model " + kLlama.string() + " --data " + data.string(), &status);
  ASSERT_EQ(status, 0) << before;
  auto out_dir = dir_ / "converted";
  std::string conv = run_cli(
      "convert --dtype f32 --model " + kLlama.string() + " --out " + out_dir.string(), &status);
  ASSERT_EQ(status, 0) << conv;
  std::string after =
      run_cli("eval --json --model " + out_dir.string() + " --data " + data.string(), &status);
  ASSERT_EQ(status, 0) << after;
  EXPECT_EQ(nlohmann::json::parse(before), nlohmann::json::parse(after));
  conv = run_cli("convert --dtype f8 --model " + kLlama.string() + " --out " + out_dir.string(),
                 &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(conv.find("--dtype"), std::string::npos) << conv;
}

// The summed loss of `ids` alone, every next token predicted.
double row_loss_sum(const models::CausalLM& model, const std::vector<int64_t>& ids) {
  NoGradGuard no_grad;
  Tensor t = Tensor::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  return model.loss(t, models::shift_targets(t), 1.0).item();
}

// Windows against each window evaluated alone: a row of 150 tokens and a
// context of 64 (the fixture's max_position_embeddings) gives windows
// [0, 64), [63, 127), [126, 150), each predicting the tokens after its
// first, so all 149 tokens the whole row predicts are predicted once.
TEST(Evaluate, LongRowsAreSplitIntoOverlappingWindows) {
  models::CausalLM model = io::load_hf_model(kLlama);
  std::vector<int32_t> row(150);
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<int32_t>((i * 37 + 11) % 97);
  std::vector<int32_t> labels = row;
  labels[0] = labels[70] = -100;  // a masked label inside the second window stays masked
  int64_t split = 0;
  const auto windows =
      exec::split_into_windows({{row, labels, 4}, {{1, 2}, {1, 2}, 5}}, 64, &split);
  EXPECT_EQ(split, 1);
  ASSERT_EQ(windows.size(), 4u);
  const std::vector<std::pair<size_t, size_t>> spans = {{0, 64}, {63, 127}, {126, 150}};
  for (size_t w = 0; w < spans.size(); ++w) {
    const auto [begin, end] = spans[w];
    EXPECT_EQ(windows[w].ids, std::vector<int32_t>(row.begin() + begin, row.begin() + end));
    EXPECT_EQ(windows[w].labels,
              std::vector<int32_t>(labels.begin() + begin, labels.begin() + end));
    EXPECT_EQ(windows[w].line, 4);
  }
  EXPECT_EQ(windows[3].ids, (std::vector<int32_t>{1, 2}));

  // The CLI without --seq-len: the same windows, against the brute force.
  double sum = 0;
  for (const auto& [begin, end] : spans)
    sum += row_loss_sum(model, std::vector<int64_t>(row.begin() + begin, row.begin() + end));
  const auto dir =
      std::filesystem::temp_directory_path() / ("lt_eval_long_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json j = {{"input_ids", row}};
  std::ofstream(dir / "long.jsonl") << j.dump() << "\n";
  int status = 0;
  const std::string out =
      run_cli("eval --json --model " + kLlama.string() + " --data " + (dir / "long.jsonl").string(),
              &status);
  ASSERT_EQ(status, 0) << out;
  const auto got = nlohmann::json::parse(out);
  EXPECT_EQ(got.at("tokens").get<int64_t>(), 149);
  EXPECT_NEAR(got.at("loss").get<double>(), sum / 149.0, 1e-5);
  // Windows drop no token (all 149 are predicted), so no row is cut: the
  // row is counted as windowed. It was counted in rows_cut, as if
  // --seq-len had dropped its tokens past 64.
  EXPECT_EQ(got.at("rows_cut").get<int64_t>(), 0);
  EXPECT_EQ(got.at("rows_windowed").get<int64_t>(), 1);
  EXPECT_EQ(got.at("window").get<int64_t>(), 64);
  EXPECT_FALSE(got.contains("seq_len")) << out;
  const std::string text = run_cli(
      "eval --model " + kLlama.string() + " --data " + (dir / "long.jsonl").string(), &status);
  ASSERT_EQ(status, 0) << text;
  EXPECT_NE(text.find("eval: 1 of 1 rows of " + (dir / "long.jsonl").string() +
                      " are longer than the model's context (max_position_embeddings 64)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("no token is lost"), std::string::npos) << text;
  EXPECT_EQ(text.find("cut"), std::string::npos) << text;

  // --seq-len cuts the row there, as train.seq_len does; past the
  // context it is refused, naming both.
  const std::string cut_out = run_cli("eval --json --seq-len 32 --model " + kLlama.string() +
                                          " --data " + (dir / "long.jsonl").string(),
                                      &status);
  ASSERT_EQ(status, 0) << cut_out;
  EXPECT_EQ(nlohmann::json::parse(cut_out).at("tokens").get<int64_t>(), 31);
  EXPECT_EQ(nlohmann::json::parse(cut_out).at("rows_cut").get<int64_t>(), 1);
  EXPECT_EQ(nlohmann::json::parse(cut_out).at("rows_windowed").get<int64_t>(), 0);
  EXPECT_EQ(nlohmann::json::parse(cut_out).at("seq_len").get<int64_t>(), 32);
  EXPECT_NEAR(nlohmann::json::parse(cut_out).at("loss").get<double>(),
              row_loss_sum(model, std::vector<int64_t>(row.begin(), row.begin() + 32)) / 31.0,
              1e-5);
  const std::string long_out = run_cli(
      "eval --seq-len 100 --model " + kLlama.string() + " --data " + (dir / "long.jsonl").string(),
      &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(long_out.find("--seq-len 100"), std::string::npos) << long_out;
  EXPECT_NE(long_out.find("max_position_embeddings 64"), std::string::npos) << long_out;
  std::filesystem::remove_all(dir);
}

// A character device never ends: reading /dev/zero as a dataset grew
// memory past 17 GB. (Bounded here by ulimit and timeout, should it
// regress.)
TEST_F(EvalCommand, ADeviceAsDataIsRefused) {
  int status = 0;
  const std::string out = run_cli("eval --model " + kLlama.string() + " --data /dev/zero", &status,
                                  "ulimit -v 4000000; timeout 60 ");
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("/dev/zero"), std::string::npos) << out;
  EXPECT_NE(out.find("character device"), std::string::npos) << out;
}

// CLI11's range checks printed the range's end, 1.8e308, in 300 digits.
TEST_F(EvalCommand, BadSizesNameTheOptionPlainly) {
  const std::regex long_number("[0-9]{20}");
  for (const std::string args :
       {"--batch-size 0", "--batch-size -3", "--seq-len -1", "--seq-len 1"}) {
    int status = 0;
    const std::string out =
        run_cli("eval --model " + kLlama.string() + " --data " +
                    write("ok.jsonl", "{\"input_ids\": [5, 9]}\n").string() + " " + args,
                &status);
    EXPECT_NE(status, 0) << args;
    EXPECT_NE(out.find(args.substr(0, args.find(' '))), std::string::npos) << args << ": " << out;
    EXPECT_FALSE(std::regex_search(out, long_number)) << args << ": " << out;
  }
}

// A tokenizer for the fixture's 97-id vocabulary: lowercase letters, digits
// and the space as byte tokens, <unk> for every other byte, <|endoftext|>.
void write_small_tokenizer(const std::filesystem::path& dir) {
  nlohmann::json vocab = nlohmann::json::object();
  uint32_t id = 0;
  for (char c = 'a'; c <= 'z'; ++c) vocab[data::byte_level_encode(std::string(1, c))] = id++;
  for (char c = '0'; c <= '9'; ++c) vocab[data::byte_level_encode(std::string(1, c))] = id++;
  vocab[data::byte_level_encode(" ")] = id++;
  vocab["<unk>"] = id++;
  const nlohmann::json tokenizer =
      lt::testing::byte_level_tokenizer(vocab, {lt::testing::special_token(id, "<|endoftext|>")});
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tokenizer.dump();
}

// `eval --data gsm8k.jsonl` read the rows as tokens and failed with
// "expected input_ids": the default is now auto, as train's, and the
// format and template used are said (on stderr, or in the JSON).
TEST_F(EvalCommand, TheDefaultFormatIsAutoAndTheOutputSaysWhatWasRead) {
  write_small_tokenizer(dir_ / "tok");
  const auto data = write("qa.jsonl",
                          "{\"question\": \"what is two and two\", \"answer\": \"four\"}\n"
                          "{\"question\": \"name a colour\", \"answer\": \"red 1\"}\n");
  const std::string common = " --model " + kLlama.string() + " --tokenizer " +
                             (dir_ / "tok").string() + " --data " + data.string();
  int status = 0;
  const std::string json_out = run_cli("eval --json" + common, &status);
  ASSERT_EQ(status, 0) << json_out;
  const auto got = nlohmann::json::parse(json_out);
  EXPECT_EQ(got.at("format"), "query_response");
  EXPECT_EQ(got.at("template"), "plain");
  const std::string explicit_out =
      run_cli("eval --json --format query_response --template plain" + common, &status);
  ASSERT_EQ(status, 0) << explicit_out;
  EXPECT_EQ(nlohmann::json::parse(explicit_out).at("loss"), got.at("loss"));
  EXPECT_EQ(nlohmann::json::parse(explicit_out).at("tokens"), got.at("tokens"));

  const std::string text_out = run_cli("eval" + common, &status);
  ASSERT_EQ(status, 0) << text_out;
  EXPECT_NE(text_out.find("format query_response"), std::string::npos) << text_out;
  EXPECT_NE(text_out.find("template plain"), std::string::npos) << text_out;

  // {"input_ids": ...} rows are still tokens under auto.
  const std::string tokens_out =
      run_cli("eval --json --model " + kLlama.string() + " --data " +
                  write("ids.jsonl", "{\"input_ids\": [5, 9, 13]}\n").string(),
              &status);
  ASSERT_EQ(status, 0) << tokens_out;
  EXPECT_EQ(nlohmann::json::parse(tokens_out).at("format"), "tokens");
  EXPECT_EQ(nlohmann::json::parse(tokens_out).at("tokens"), 2);
}

}  // namespace
}  // namespace lt
