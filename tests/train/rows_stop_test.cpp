// Note [Stopping eval and generate] (cli/rows_stop.h): rows are written in
// row order as they finish, and a SIGTERM keeps every row answered: the
// command finishes the batch in flight, writes the rows answered past the
// first unanswered one too, says how many it kept and where, and ends by
// the signal. Each row kept is that row of a run to the end (eval), or what
// the library makes for it (generate). Before, generate printed nothing
// until its last row and eval wrote --out only at the end: a stop lost
// every answer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <string>
#include <vector>

#include "data/byte_level.h"
#include "io/hf_model.h"
#include "support/byte_level_tokenizer.h"
#include "train/generation.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

constexpr int kRows = 600;

std::vector<std::string> lines_of(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Row r's prompt: a few ids of the fixture's 97, varied in length.
std::vector<int32_t> prompt_of(int r) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 3 + r % 7; ++i) ids.push_back((r * 13 + i * 5) % 90 + 3);
  return ids;
}

TEST(RowsStop, GenerateKeepsThePrintedRowsInRowOrder) {
  TempDir tmp("rows_stop_generate");
  std::string rows;
  for (int r = 0; r < kRows; ++r)
    rows += nlohmann::json({{"input_ids", prompt_of(r)}}).dump() + "\n";
  write_text(tmp / "ids.jsonl", rows);
  const fs::path printed = tmp / "printed.jsonl";
  const int fd = ::open(printed.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  Child child(
      {"generate", "--model", fixture("llama").string(), "--data", (tmp / "ids.jsonl").string(),
       "--json", "--batch-size", "2", "--max-new-tokens", "30"},
      tmp / "stderr.txt", fd);
  ::close(fd);
  ASSERT_TRUE(wait_for_lines(child, printed, 5)) << child.output();
  child.signal(SIGTERM);
  const int status = child.wait(60);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status << child.output();
  const std::vector<std::string> lines = lines_of(printed);
  ASSERT_GE(lines.size(), 5u);
  ASSERT_LT(lines.size(), static_cast<size_t>(kRows)) << "the stop came after the last row";
  EXPECT_MENTIONS(child.output(), "generate: stopped by signal 15 after the batch in flight; " +
                                      std::to_string(lines.size()) + " of " +
                                      std::to_string(kRows) + " rows were printed (rows 1 to ");
  // Every row printed once, rows 1..K first in order, then the others
  // answered in order; each as the library makes it in the same batches.
  std::vector<std::vector<int32_t>> prompts;
  for (int r = 0; r < kRows; ++r) prompts.push_back(prompt_of(r));
  GenerationOptions options;
  options.max_new_tokens = 30;
  options.eos_ids = {2};  // the fixture's generation_config.json
  options.batch_size = 2;
  const std::vector<Generation> want =
      generate(io::load_hf_model(fixture("llama"), DType::F32), prompts, options);
  int64_t previous = 0;
  for (size_t r = 0; r < lines.size(); ++r) {
    const nlohmann::json row = nlohmann::json::parse(lines[r]);
    const int64_t number = row.at("row").get<int64_t>();
    EXPECT_GT(number, previous) << "rows in order, each once";
    previous = number;
    EXPECT_EQ(row.at("output_ids").get<std::vector<int32_t>>(),
              want[static_cast<size_t>(number - 1)].tokens)
        << number;
  }
  EXPECT_EQ(nlohmann::json::parse(lines[0]).at("row"), 1);
}

TEST(RowsStop, EvalMathKeepsTheAnsweredRowsInOutsPartialFile) {
  TempDir tmp("rows_stop_eval");
  // Each printable ASCII character one token (ids 0..94), <unk> 95.
  nlohmann::json vocab = nlohmann::json::object();
  for (char c = 0x20; c < 0x7F; ++c) vocab[data::byte_level_encode(std::string(1, c))] = c - 0x20;
  vocab["<unk>"] = 95;
  fs::create_directories(tmp / "tok");
  write_text(
      tmp / "tok" / "tokenizer.json",
      lt::testing::byte_level_tokenizer(vocab, {lt::testing::special_token(96, "<|endoftext|>")})
          .dump());
  std::string rows;
  for (int r = 0; r < kRows; ++r) {
    rows += nlohmann::json({{"question", "what is " + std::to_string(r) + "+1"},
                            {"answer", "#### " + std::to_string(r + 1)}})
                .dump() +
            "\n";
  }
  write_text(tmp / "all.jsonl", rows);
  const auto eval_args = [&](const std::string& data, const std::string& out) {
    return std::vector<std::string>{"eval",
                                    "--task",
                                    "math",
                                    "--model",
                                    fixture("llama").string(),
                                    "--tokenizer",
                                    (tmp / "tok").string(),
                                    "--data",
                                    (tmp / data).string(),
                                    "--out",
                                    (tmp / out).string(),
                                    "--batch-size",
                                    "2",
                                    "--max-new-tokens",
                                    "20"};
  };
  const fs::path partial = tmp / "answers.jsonl.partial";
  Child child(eval_args("all.jsonl", "answers.jsonl"), tmp / "eval.log");
  ASSERT_TRUE(wait_for_lines(child, partial, 5)) << child.output();
  child.signal(SIGTERM);
  const int status = child.wait(60);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status << child.output();
  EXPECT_FALSE(fs::exists(tmp / "answers.jsonl")) << "--out is the whole file or none";
  const std::vector<std::string> kept = lines_of(partial);
  ASSERT_GE(kept.size(), 5u);
  ASSERT_LT(kept.size(), static_cast<size_t>(kRows)) << "the stop came after the last row";
  EXPECT_MENTIONS(child.output(), "eval: stopped by signal 15 after the batch in flight; kept " +
                                      std::to_string(kept.size()) + " answers in " +
                                      partial.string());
  // The run to the end: --out holds every row, no .partial file is left,
  // and each row kept is its line there.
  std::string output;
  ASSERT_EQ(run_program(eval_args("all.jsonl", "whole.jsonl"), tmp / "whole.log", &output, 120), 0)
      << output;
  EXPECT_FALSE(fs::exists(tmp / "whole.jsonl.partial"));
  const std::vector<std::string> whole = lines_of(tmp / "whole.jsonl");
  ASSERT_EQ(whole.size(), static_cast<size_t>(kRows));
  int64_t previous = 0;
  for (const std::string& line : kept) {
    const int64_t at = nlohmann::json::parse(line).at("line").get<int64_t>();
    EXPECT_GT(at, previous) << "rows in order, each once";
    previous = at;
    EXPECT_EQ(line, whole[static_cast<size_t>(at - 1)]);
  }
}

TEST(RowsStop, RowsInOrderHandsEachIndexOnceItsPrefixIsDone) {
  std::vector<int64_t> emitted;
  RowsInOrder in_order(5, [&](int64_t i) { emitted.push_back(i); });
  for (int64_t i : {2, 0, 4}) in_order.done(i);
  EXPECT_EQ(emitted, (std::vector<int64_t>{0}));
  in_order.done(1);
  EXPECT_EQ(emitted, (std::vector<int64_t>{0, 1, 2}));
  in_order.done(3);
  EXPECT_EQ(emitted, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(in_order.emitted(), 5);
  EXPECT_EQ(in_order.flush_done(), 0);
  // A stop: the done indices past the first not done follow, in order.
  emitted.clear();
  RowsInOrder stopped(6, [&](int64_t i) { emitted.push_back(i); });
  for (int64_t i : {4, 0, 2}) stopped.done(i);
  EXPECT_EQ(stopped.flush_done(), 2);
  EXPECT_EQ(emitted, (std::vector<int64_t>{0, 2, 4}));
  stopped.done(1);  // after the flush nothing more is handed on
  EXPECT_EQ(emitted, (std::vector<int64_t>{0, 2, 4}));
}

}  // namespace
}  // namespace lt::train::testing
