// `eval`: batching with padding against one row at a time, and the command's
// handling of good and bad input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/grad_mode.h"
#include "exec/evaluate.h"
#include "io/hf_model.h"

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

std::string run_cli(const std::string& args, int* status) {
  const std::string cmd = std::string(LT_BINARY_DIR) + "/lazytrain " + args + " 2>&1";
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

  auto no_field = write("field.jsonl", "{\"ids\": [1, 2]}\n");
  out = run_cli("eval --model " + kLlama.string() + " --data " + no_field.string(), &status);
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

}  // namespace
}  // namespace lt
