// `lazytrain generate` and `lazytrain eval --task math` end to end, on the
// Llama fixture (97 ids) with a tokenizer made for it here: the 95
// printable ASCII characters as ids 0..94 (no merges), <unk> (95) for every
// other byte, and <|endoftext|> (96). Prompts built by hand from that table
// are the reference for what the command renders; the tokens it makes are
// checked against the library's generate() (itself checked against
// transformers in tests/models).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/byte_level.h"
#include "data/math_answer.h"
#include "data/tokenizer.h"
#include "io/hf_model.h"
#include "support/byte_level_tokenizer.h"
#include "support/cli_run.h"
#include "support/generate_rows.h"
#include "train/generation.h"
#include "train/generation_placement.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

const fs::path kLlama = fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/llama";
constexpr int32_t kUnk = 95, kEndOfText = 96;
constexpr int32_t kFolderEos = 2;  // the fixture's generation_config.json

int32_t id_of(char c) {
  return c - 0x20;
}

using lt::testing::CliResult;
using lt::testing::generated_rows;

class GenerateCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lt_generate_cli_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "tok");
    nlohmann::json vocab = nlohmann::json::object();
    for (char c = 0x20; c < 0x7F; ++c) vocab[data::byte_level_encode(std::string(1, c))] = id_of(c);
    vocab["<unk>"] = kUnk;
    const nlohmann::json tokenizer = lt::testing::byte_level_tokenizer(
        vocab, {lt::testing::special_token(kEndOfText, "<|endoftext|>")});
    std::ofstream(dir_ / "tok" / "tokenizer.json") << tokenizer.dump();
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  // `lazytrain ARGS --model <llama> --tokenizer <tok>`.
  CliResult run(const std::string& args) {
    return lt::testing::run_lazytrain(
        args + " --model " + kLlama.string() + " --tokenizer " + (dir_ / "tok").string(),
        dir_ / "stderr.txt");
  }

  // What the library makes from `prompt`, with the EOS ids the command uses.
  std::vector<Generation> library(const std::vector<std::vector<int32_t>>& prompts,
                                  int64_t max_new_tokens) {
    static const models::CausalLM model = io::load_hf_model(kLlama, DType::F32);
    GenerationOptions options;
    options.max_new_tokens = max_new_tokens;
    options.eos_ids = {kFolderEos, kEndOfText};
    return generate(model, prompts, options);
  }

  fs::path dir_;
};

// The plain template (the tokenizer has no chat template): the user text,
// then "\n" (here <unk>), and the model answers after it.
std::vector<int32_t> plain_prompt(const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(id_of(c));
  ids.push_back(kUnk);
  return ids;
}

// The text of new tokens by the table above (a final EOS is not text).
std::string text_of(const Generation& g) {
  std::string s;
  for (size_t i = 0; i < g.tokens.size(); ++i) {
    if (g.finish == FinishReason::kEos && i + 1 == g.tokens.size()) break;
    if (g.tokens[i] < kUnk) s += static_cast<char>(g.tokens[i] + 0x20);
  }
  return s;
}

TEST_F(GenerateCommand, APromptIsRenderedAsTrainingDoesAndAnsweredAsTheLibraryDoes) {
  const CliResult r = run("generate --prompt 'ab1 2' --max-new-tokens 12 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = generated_rows(r.out).at(0);
  const std::vector<Generation> want = library({plain_prompt("ab1 2")}, 12);
  EXPECT_EQ(j.at("output_ids").get<std::vector<int32_t>>(), want[0].tokens);
  EXPECT_EQ(j.at("finish"), finish_reason_name(want[0].finish));
  EXPECT_EQ(j.at("text"), text_of(want[0]));

  // Streamed to the terminal: the same text.
  const CliResult streamed = run("generate --prompt 'ab1 2' --max-new-tokens 12");
  ASSERT_EQ(streamed.status, 0) << streamed.err;
  EXPECT_EQ(streamed.out, text_of(want[0]) + "\n");
  EXPECT_NE(streamed.err.find("tokens/s"), std::string::npos) << streamed.err;
}

TEST_F(GenerateCommand, AStopStringCutsTheText) {
  const std::vector<Generation> want = library({plain_prompt("hello")}, 20);
  const std::string full = text_of(want[0]);
  ASSERT_GE(full.size(), 6u) << "the fixture's answer is too short to cut";
  const std::string stop = full.substr(3, 2);
  const size_t at = full.find(stop);
  const CliResult r =
      run("generate --prompt hello --max-new-tokens 20 --json --stop '" + stop + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = generated_rows(r.out).at(0);
  EXPECT_EQ(j.at("text"), full.substr(0, at));
  EXPECT_EQ(j.at("finish"), "stop");
  // The tokens run up to the one that completed the stop string.
  EXPECT_EQ(j.at("output_ids").size(), at + stop.size());
  // Streaming never shows the stop string.
  const CliResult streamed =
      run("generate --prompt hello --max-new-tokens 20 --stop '" + stop + "'");
  EXPECT_EQ(streamed.out, full.substr(0, at) + "\n");
}

TEST_F(GenerateCommand, DataRowsComeBackInOrder) {
  const std::vector<std::vector<int32_t>> prompts = {{5, 9}, {1, 2, 3, 4, 5, 6, 7}, {40}};
  const auto data = write("ids.jsonl",
                          "{\"input_ids\": [5, 9]}\n\n{\"input_ids\": [1, 2, 3, 4, 5, 6, 7]}\n"
                          "{\"input_ids\": [40]}\n");
  const CliResult r =
      run("generate --data " + data.string() + " --max-new-tokens 9 --batch-size 2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<nlohmann::json> rows = generated_rows(r.out);
  ASSERT_EQ(rows.size(), 3u);
  // Token rows have no template: only the folder's EOS ends them.
  GenerationOptions options;
  options.max_new_tokens = 9;
  options.eos_ids = {kFolderEos};
  const models::CausalLM model = io::load_hf_model(kLlama, DType::F32);
  const std::vector<Generation> want = generate(model, prompts, options);
  const std::vector<int64_t> file_lines = {1, 3, 4};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rows[i].at("row"), i + 1);
    EXPECT_EQ(rows[i].at("line"), file_lines[i]);
    EXPECT_EQ(rows[i].at("output_ids").get<std::vector<int32_t>>(), want[i].tokens) << i;
  }
  // The text output numbers the rows as --json does, with a tokenizer
  // (the text) or without one (the ids).
  const std::string args = "generate --data " + data.string() + " --max-new-tokens 9";
  const CliResult text = run(args);
  const CliResult ids =
      lt::testing::run_lazytrain(args + " --model " + kLlama.string(), dir_ / "stderr.txt");
  ASSERT_EQ(text.status, 0) << text.err;
  ASSERT_EQ(ids.status, 0) << ids.err;
  for (size_t i = 0; i < 3; ++i) {
    const std::string header = fmt::format("=== row {}, line {} (", i + 1, file_lines[i]);
    EXPECT_NE(text.out.find(header), std::string::npos) << header << "\n" << text.out;
    const std::string with_ids =
        fmt::format("{}{}) ===\n{}\n", header, finish_reason_name(want[i].finish),
                    fmt::join(want[i].tokens, " "));
    EXPECT_NE(ids.out.find(with_ids), std::string::npos) << with_ids << "\n" << ids.out;
  }
}

// --json is one object per line: the rows, then the speed (the README's
// "new_tokens", "seconds", "tokens_per_s"), whose new_tokens are the
// rows' output_ids counted; stderr stays free of the text speed line.
TEST_F(GenerateCommand, JsonEndsWithTheSpeedOfTheRowsTokens) {
  const auto data = write("ids.jsonl", "{\"input_ids\": [5, 9]}\n{\"input_ids\": [40]}\n");
  for (const std::string& input : {"--data " + data.string(), std::string("--prompt ab")}) {
    SCOPED_TRACE(input);
    const bool from_data = input.rfind("--data", 0) == 0;
    const CliResult r = run("generate " + input + " --max-new-tokens 7 --json" +
                            (from_data ? " --batch-size 2" : ""));
    ASSERT_EQ(r.status, 0) << r.err;
    std::istringstream lines(r.out);
    std::string line;
    std::vector<nlohmann::json> objects;
    while (std::getline(lines, line)) objects.push_back(nlohmann::json::parse(line));
    const size_t rows = from_data ? 2 : 1;
    ASSERT_EQ(objects.size(), rows + 1) << r.out;
    int64_t made = 0;
    for (size_t i = 0; i < rows; ++i) {
      EXPECT_EQ(objects[i].at("row"), i + 1);
      // A row's line in its file: --data only, as --help says.
      EXPECT_EQ(objects[i].contains("line"), from_data) << objects[i];
      made += static_cast<int64_t>(objects[i].at("output_ids").size());
    }
    const nlohmann::json& speed = objects.back();
    EXPECT_FALSE(speed.contains("row")) << speed;
    EXPECT_EQ(speed.at("new_tokens"), made);
    const double seconds = speed.at("seconds").get<double>();
    ASSERT_GT(seconds, 0);
    EXPECT_NEAR(speed.at("tokens_per_s").get<double>(), made / seconds, 1e-9 * made / seconds);
    EXPECT_EQ(r.err.find("tokens/s"), std::string::npos) << r.err;
  }
}

// No new token at all is not a run to ask for: 0 and below are refused,
// naming the option, by generate and eval --task math alike.
TEST_F(GenerateCommand, MaxNewTokensBelowOneIsRefusedNamingIt) {
  const auto data = write("math.jsonl", "{\"question\": \"1+1\", \"answer\": \"#### 2\"}\n");
  for (const std::string n : {"0", "-3"}) {
    for (const std::string& command :
         {std::string("generate --prompt hi"), "eval --task math --data " + data.string()}) {
      const CliResult r = run(command + " --max-new-tokens " + n);
      EXPECT_NE(r.status, 0) << command << " " << n;
      EXPECT_NE(r.err.find("--max-new-tokens must be at least 1"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("got " + n), std::string::npos) << r.err;
    }
  }
}

// Query/response rows under other field names (a user's {"q", "a"}) are
// read by eval, for the loss and --task math, under --prompt-field and
// --response-field as train reads them under data.prompt_field and
// data.response_field: exactly as the same rows under the names detected
// (query, response). Without them each error names the options eval has.
TEST_F(GenerateCommand, EvalReadsQueryResponseRowsUnderTheFieldsNamed) {
  std::string custom, known;
  for (const char* q : {"1+1", "2+3", "4+4"}) {
    const std::string a = std::string("#### ") + q;
    custom += nlohmann::json{{"q", q}, {"a", a}}.dump() + "\n";
    known += nlohmann::json{{"query", q}, {"response", a}}.dump() + "\n";
  }
  const std::string qa = write("qa.jsonl", custom).string();
  const std::string qr = write("qr.jsonl", known).string();

  const CliResult loss = run("eval --json --data " + qa + " --prompt-field q --response-field a");
  const CliResult reference = run("eval --json --data " + qr);
  ASSERT_EQ(loss.status, 0) << loss.err;
  ASSERT_EQ(reference.status, 0) << reference.err;
  EXPECT_EQ(loss.out, reference.out);
  EXPECT_EQ(nlohmann::json::parse(loss.out).at("format"), "query_response");

  const std::string math = "eval --task math --device cpu --max-new-tokens 4 --json --data ";
  const auto text_of = [](const fs::path& path) {
    std::stringstream text;
    text << std::ifstream(path).rdbuf();
    return text.str();
  };
  for (const std::string reference_option : {"--response-field a", "--answer-field a"}) {
    const CliResult named = run(math + qa + " --prompt-field q " + reference_option + " --out " +
                                (dir_ / "qa.out").string());
    const CliResult detected = run(math + qr + " --out " + (dir_ / "qr.out").string());
    ASSERT_EQ(named.status, 0) << named.err;
    ASSERT_EQ(detected.status, 0) << detected.err;
    EXPECT_EQ(nlohmann::json::parse(named.out).at("n"), 3);
    EXPECT_EQ(text_of(dir_ / "qa.out"), text_of(dir_ / "qr.out")) << reference_option;
  }

  const CliResult no_prompt = run(math + qa + " --format query_response --answer-field a");
  EXPECT_NE(no_prompt.status, 0);
  EXPECT_NE(no_prompt.err.find("no prompt field (query, question or prompt); name it with "
                               "--prompt-field"),
            std::string::npos)
      << no_prompt.err;
  const CliResult no_fields = run("eval --data " + qa + " --format query_response");
  EXPECT_NE(no_fields.status, 0);
  EXPECT_NE(no_fields.err.find("name them with --prompt-field and --response-field"),
            std::string::npos)
      << no_fields.err;
  const CliResult no_format = run("eval --data " + qa);
  EXPECT_NE(no_format.status, 0);
  EXPECT_NE(no_format.err.find("(or set --format, or --prompt-field and --response-field)"),
            std::string::npos)
      << no_format.err;
}

// Options generate can check alone are checked before the model loads:
// with a folder that holds no model, the error is the option's.
TEST_F(GenerateCommand, SamplingAndBatchOptionsAreCheckedBeforeTheModelLoads) {
  fs::create_directories(dir_ / "empty");
  for (const auto& [option, message] : std::vector<std::pair<std::string, std::string>>{
           {"--temperature -1", "--temperature must be 0 (greedy) or positive, got -1"},
           {"--temperature 1 --top-p 0", "--top-p must be in (0, 1], got 0"},
           {"--batch-size 0", "--batch-size must be at least 1"}}) {
    const CliResult r = lt::testing::run_lazytrain(
        "generate --prompt hi " + option + " --model " + (dir_ / "empty").string(),
        dir_ / "stderr.txt");
    EXPECT_NE(r.status, 0) << option;
    EXPECT_NE(r.err.find(message), std::string::npos) << option << ": " << r.err;
  }
}

// An empty --stop would end every row at its first token: refused before
// the model loads (here an empty folder, which would be refused next),
// not after a large model has been read.
TEST_F(GenerateCommand, AnEmptyStopIsRefusedBeforeTheModelLoads) {
  fs::create_directories(dir_ / "empty");
  const fs::path rows = write("rows.jsonl", "{\"question\": \"1+1?\", \"answer\": \"2\"}\n");
  const std::vector<std::string> commands = {"generate --prompt hi",
                                             "eval --task math --data " + rows.string()};
  for (const std::string& command : commands) {
    const CliResult r = lt::testing::run_lazytrain(
        command + " --stop '' --model " + (dir_ / "empty").string(), dir_ / "stderr.txt");
    EXPECT_NE(r.status, 0) << command;
    EXPECT_NE(r.err.find("--stop: an empty stop string would stop every"), std::string::npos)
        << command << ": " << r.err;
    EXPECT_EQ(r.err.find("not a model folder"), std::string::npos) << command << ": " << r.err;
  }
}

// The loss reads none of --task math's options: each is refused by name,
// with the task it needs, rather than the loss printed as though it had
// been used; --out writes no file.
TEST_F(GenerateCommand, EvalLossRefusesEachMathOptionByName) {
  const auto data = write("ids.jsonl", "{\"input_ids\": [5, 9, 11]}\n");
  const fs::path out = dir_ / "loss.json";
  const std::vector<std::pair<std::string, std::string>> options = {
      {"--answer-field", "answer"}, {"--out", out.string()},
      {"--max-new-tokens", "4"},    {"--stop", "x"},
      {"--device", "cuda"},         {"--device-memory-gb", "1"}};
  for (const auto& [name, value] : options) {
    for (const std::string task : {"", " --task loss"}) {
      const CliResult r = run("eval --data " + data.string() + task + " " + name + " " + value);
      EXPECT_NE(r.status, 0) << name << task;
      EXPECT_NE(r.err.find("error: " + name + " "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("give --task math, or leave " + name + " out"), std::string::npos)
          << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(out));
  const CliResult loss = run("eval --json --data " + data.string());
  ASSERT_EQ(loss.status, 0) << loss.err;
  EXPECT_TRUE(nlohmann::json::parse(loss.out).contains("loss")) << loss.out;
  // Where the loss runs, said: accepted, as before the refusals.
  for (const std::string device : {"cpu", "auto"}) {
    const CliResult on = run("eval --json --device " + device + " --data " + data.string());
    ASSERT_EQ(on.status, 0) << on.err;
    EXPECT_EQ(on.out, loss.out);
  }
}

// An --out eval --task math cannot write is refused before the model
// answers (the line saying what it answers comes first), naming the option
// and the missing folder, not after all the answers were made.
TEST_F(GenerateCommand, EvalMathRefusesAnOutItCannotWriteBeforeAnswering) {
  const auto data = write("math.jsonl", "{\"question\": \"1+1\", \"answer\": \"#### 2\"}\n");
  const fs::path out = dir_ / "missing" / "predictions.jsonl";
  const CliResult r = run("eval --task math --data " + data.string() +
                          " --max-new-tokens 4 --device cpu --out " + out.string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--out " + out.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find((dir_ / "missing").string() + " does not exist"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("eval: task math on"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(GenerateCommand, SeededSamplingRepeats) {
  const std::string args =
      "generate --prompt abc --max-new-tokens 16 --json --temperature 1.5 "
      "--top-k 20 --seed 9";
  const CliResult a = run(args), b = run(args);
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_EQ(generated_rows(a.out), generated_rows(b.out));
  // A negative seed is refused (CLI11 wrapped -1 into 2^64 - 1).
  const CliResult negative = run("generate --prompt abc --max-new-tokens 2 --seed -1");
  EXPECT_NE(negative.status, 0);
  EXPECT_NE(negative.err.find("--seed: a seed is a whole number from 0 to 18446744073709551615, "
                              "not -1"),
            std::string::npos)
      << negative.err;
}

// A --prompt, or a file whose every row is, longer than the fixture's
// context (max_position_embeddings 64) is refused: prompts are not cut.
TEST_F(GenerateCommand, APromptLongerThanTheContextIsRefused) {
  const CliResult r = run("generate --prompt '" + std::string(70, 'x') + "'");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--prompt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("max_position_embeddings"), std::string::npos) << r.err;
  // A --prompt is no row of a file.
  EXPECT_NE(r.err.find("prompts are not cut: shorten the prompt"), std::string::npos) << r.err;
  const auto data = write("long.jsonl", "{\"question\": \"" + std::string(70, 'y') + "\"}\n");
  for (const std::string command : {"generate", "eval --task math --answer-field question"}) {
    const CliResult rows = run(command + " --data " + data.string());
    EXPECT_NE(rows.status, 0) << command;
    EXPECT_NE(rows.err.find(data.string() + ":1: the prompt has 71 tokens"), std::string::npos)
        << rows.err;
    EXPECT_NE(rows.err.find("prompts are not cut: shorten the row or leave it out"),
              std::string::npos)
        << rows.err;
  }
}

// A row of --data whose prompt is longer than the context is skipped as a
// malformed row is, counted and named on the skipped-rows line; the other
// rows are answered as the library answers them alone.
TEST_F(GenerateCommand, ARowLongerThanTheContextIsSkippedAndTheOthersAnswered) {
  std::vector<int32_t> long_row;
  for (int32_t i = 0; i < 70; ++i) long_row.push_back(3 + i % 80);
  const auto data = write("ids.jsonl", "{\"input_ids\": [5, 9]}\n" +
                                           nlohmann::json{{"input_ids", long_row}}.dump() +
                                           "\nnot json\n{\"input_ids\": [40]}\n");
  const CliResult r = run("generate --data " + data.string() + " --max-new-tokens 9 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<nlohmann::json> rows = generated_rows(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  GenerationOptions options;
  options.max_new_tokens = 9;
  options.eos_ids = {kFolderEos};
  const std::vector<Generation> want =
      generate(io::load_hf_model(kLlama, DType::F32), {{5, 9}, {40}}, options);
  const std::vector<int64_t> file_lines = {1, 4};
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(rows[i].at("row"), i + 1);
    EXPECT_EQ(rows[i].at("line"), file_lines[i]);
    EXPECT_EQ(rows[i].at("output_ids").get<std::vector<int32_t>>(), want[i].tokens) << i;
  }
  const std::string file = data.string();
  EXPECT_NE(r.err.find("generate: 2 of 4 rows of " + file + " skipped (first: " + file + ":3: "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("; 1 of them for the prompt's length (first: " + file +
                       ":2: the prompt has 70 tokens, more than the model's context of 64 "
                       "(max_position_embeddings); prompts are not cut)"),
            std::string::npos)
      << r.err;
}

// eval --task math skips such a row too and scores the others: the
// accuracy is that of the file without it, and the line and --json say how
// many rows were not answered.
TEST_F(GenerateCommand, EvalMathScoresTheRowsThatFitAndCountsTheSkipped) {
  const std::string long_question(70, 'y');
  const std::string fits = "{\"question\": \"1+1\", \"answer\": \"#### 2\"}\n";
  const std::string also_fits = "{\"question\": \"what is 7*8\", \"answer\": \"#### 56\"}\n";
  const auto data = write("math.jsonl", fits + "{\"question\": \"" + long_question +
                                            "\", \"answer\": \"#### 3\"}\n" + also_fits);
  const auto without = write("without.jsonl", fits + also_fits);
  const std::string math = "eval --task math --max-new-tokens 12 --device cpu --data ";
  const CliResult r = run(math + data.string() + " --json");
  const CliResult reference = run(math + without.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(reference.status, 0) << reference.err;
  const auto j = nlohmann::json::parse(r.out), want = nlohmann::json::parse(reference.out);
  EXPECT_EQ(j.at("n"), 2);
  EXPECT_EQ(j.at("n"), want.at("n"));
  EXPECT_EQ(j.at("correct"), want.at("correct"));
  EXPECT_EQ(j.at("accuracy"), want.at("accuracy"));
  EXPECT_EQ(j.at("skipped"), 1);
  EXPECT_EQ(want.at("skipped"), 0);
  const std::string tokens = std::to_string(plain_prompt(long_question).size());
  EXPECT_NE(r.err.find("eval: 1 of 3 rows of " + data.string() + " skipped (first: " +
                       data.string() + ":2: the prompt has " + tokens + " tokens"),
            std::string::npos)
      << r.err;
  const CliResult text = run(math + data.string());
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find(" of 2 rows exactly right; 1 skipped row not answered)"),
            std::string::npos)
      << text.out;
}

// What --prompt (one message) or greedy decoding (no draw) would ignore is
// refused by name, saying what it is for, before the model loads.
TEST_F(GenerateCommand, OptionsThatWouldDoNothingAreRefusedByName) {
  fs::create_directories(dir_ / "empty");
  const auto data = write("q.jsonl", "{\"question\": \"hi\"}\n");
  const std::string greedy_seed =
      "generate: --seed seeds sampling, which needs --temperature above 0 (0, the default, is "
      "greedy decoding, which draws nothing); set --temperature, e.g. 0.7, or leave --seed out";
  for (const auto& [option, message] : std::vector<std::pair<std::string, std::string>>{
           {"--prompt hi --format tokens",
            "generate: --format says how the rows of --data are read; --prompt is one user "
            "message: give --data, or leave --format out"},
           {"--prompt hi --prompt-field q",
            "generate: --prompt-field names the prompt's field in query_response rows of --data; "
            "--prompt is one user message: give --data, or leave --prompt-field out"},
           {"--prompt hi --batch-size 2",
            "generate: --batch-size sets how many rows of --data are generated together; "
            "--prompt is one user message: give --data, or leave --batch-size out"},
           {"--prompt hi --seed 3", greedy_seed},
           {"--data " + data.string() + " --seed 0 --temperature 0", greedy_seed}}) {
    const CliResult r = lt::testing::run_lazytrain(
        "generate " + option + " --model " + (dir_ / "empty").string(), dir_ / "stderr.txt");
    EXPECT_NE(r.status, 0) << option;
    EXPECT_NE(r.err.find(message), std::string::npos) << option << ": " << r.err;
  }
}

TEST_F(GenerateCommand, BadOptionsAreRefusedByName) {
  const auto data = write("q.jsonl", "{\"question\": \"hi\"}\n");
  const CliResult both = run("generate --prompt hi --data " + data.string());
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.err.find("one of --prompt TEXT and --data FILE.jsonl, not both"),
            std::string::npos)
      << both.err;
  const CliResult empty = run("generate --prompt ''");
  EXPECT_NE(empty.status, 0);
  EXPECT_NE(empty.err.find("give --prompt TEXT (not empty) or --data"), std::string::npos)
      << empty.err;
  // Sampling options without sampling would do nothing: refused.
  const CliResult greedy_top_k = run("generate --prompt hi --top-k 5");
  EXPECT_NE(greedy_top_k.status, 0);
  EXPECT_NE(greedy_top_k.err.find("needs --temperature above 0"), std::string::npos)
      << greedy_top_k.err;
  const CliResult top_p = run("generate --prompt hi --top-p 1.5 --temperature 1");
  EXPECT_NE(top_p.status, 0);
  EXPECT_NE(top_p.err.find("--top-p"), std::string::npos) << top_p.err;
  const CliResult task = run("eval --task poetry --data " + data.string());
  EXPECT_NE(task.status, 0);
  EXPECT_NE(task.err.find("unknown --task \"poetry\""), std::string::npos) << task.err;
}

// A model's vocabulary padded past its tokenizer's (Qwen2.5's 151,936 ids
// for 151,669 tokens): ids without a token add no text instead of failing
// the decode. Here a tokenizer of 41 ids (' ' to 'H', <unk>) under the
// 97-id model: the text is the tokens below 40 by the table, in order.
TEST_F(GenerateCommand, IdsPastTheTokenizerHaveNoText) {
  nlohmann::json vocab = nlohmann::json::object();
  for (char c = 0x20; c < 0x48; ++c) vocab[data::byte_level_encode(std::string(1, c))] = id_of(c);
  vocab["<unk>"] = 40;
  const nlohmann::json tokenizer = lt::testing::byte_level_tokenizer(vocab, {});
  fs::create_directories(dir_ / "small");
  std::ofstream(dir_ / "small" / "tokenizer.json") << tokenizer.dump();
  const data::Tokenizer small = data::Tokenizer::load(dir_ / "small");
  const models::CausalLM model = io::load_hf_model(kLlama, DType::F32);
  GenerationOptions options;
  options.max_new_tokens = 24;
  options.tokenizer = &small;
  options.stop_strings = {"never said"};
  const std::vector<Generation> out = generate(model, {{1, 2, 3}}, options);
  std::string want;
  bool past = false;
  for (int32_t id : out[0].tokens) {
    if (id < 40) want += static_cast<char>(id + 0x20);
    past = past || id > 40;
  }
  ASSERT_TRUE(past) << "no id past the small tokenizer: nothing was tested";
  EXPECT_EQ(out[0].text, want);
}

// An EOS id past the model's vocabulary can end no answer: said (a tiny
// test config keeps GPT-2's 50256 with 97 ids, so not refused).
TEST_F(GenerateCommand, AnEosIdPastTheVocabularyIsSaid) {
  const fs::path model = dir_ / "model";
  fs::copy(kLlama, model);
  std::ofstream(model / "generation_config.json") << R"({"eos_token_id": [2, 50256]})";
  const CliResult r =
      lt::testing::run_lazytrain("generate --model " + model.string() + " --tokenizer " +
                                     (dir_ / "tok").string() + " --prompt hi --max-new-tokens 2",
                                 dir_ / "stderr.txt");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(
      r.err.find("generate: note: end-of-sequence id 50256 (eos_token_id of " + model.string() +
                 "'s generation_config.json, else config.json) lies outside the model's "
                 "vocabulary of 97: no answer can end on it"),
      std::string::npos)
      << r.err;
  // The fixture's own (2) is inside it: nothing said.
  EXPECT_EQ(run("generate --prompt hi --max-new-tokens 2").err.find("end-of-sequence id"),
            std::string::npos);
}

// eval --task math scores rows by the answer extracted from the greedy
// output: rows whose reference is set to the library's extracted answer
// count as right, the others (a number it does not produce) as wrong.
TEST_F(GenerateCommand, MathAccuracyCountsExactMatches) {
  const std::vector<std::string> questions = {"1+1", "what is 7*8", "12 34", "9 9 9", "0"};
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& q : questions) prompts.push_back(plain_prompt(q));
  const std::vector<Generation> outputs = library(prompts, 24);
  std::string rows;
  int expected_right = 0;
  std::vector<bool> right;
  for (size_t i = 0; i < questions.size(); ++i) {
    const std::string answer = data::predicted_answer(text_of(outputs[i]));
    const bool use = !answer.empty() && i % 2 == 0;
    expected_right += use;
    right.push_back(use);
    nlohmann::json row = {{"question", questions[i]},
                          {"answer", "work\n#### " + (use ? answer : std::string("-123456789"))}};
    rows += row.dump() + "\n";
  }
  ASSERT_GT(expected_right, 0) << "no output had a number to match";
  rows += "{\"question\": \"no reference\"}\n";
  const auto data = write("math.jsonl", rows);
  const fs::path out = dir_ / "predictions.jsonl";
  const CliResult r = run("eval --task math --data " + data.string() +
                          " --max-new-tokens 24 --batch-size 2 --json --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("task"), "math");
  EXPECT_EQ(j.at("n"), 5);
  EXPECT_EQ(j.at("correct"), expected_right);
  EXPECT_DOUBLE_EQ(j.at("accuracy").get<double>(), expected_right / 5.0);
  std::ifstream in(out);
  std::string line;
  size_t i = 0;
  while (std::getline(in, line)) {
    const auto p = nlohmann::json::parse(line);
    ASSERT_LT(i, right.size());
    EXPECT_EQ(p.at("correct"), right[i]) << line;
    EXPECT_EQ(p.at("output"), text_of(outputs[i]));
    EXPECT_EQ(p.at("line"), static_cast<int64_t>(i + 1));
    EXPECT_EQ(p.at("prompt").get<std::string>().rfind(questions[i], 0), 0u) << line;
    ++i;
  }
  EXPECT_EQ(i, 5u);
  EXPECT_NE(r.err.find("1 rows have no reference"), std::string::npos) << r.err;
}

// The smallest --device-memory-gb that streams (one byte short of the
// whole model, its cache and working memory, by generation_footprint) for
// rows of up to `longest` prompt tokens, in GB with every byte written.
std::string streaming_cap(int64_t batch, int64_t longest, int64_t max_new_tokens) {
  const models::CausalLM model = io::load_hf_model(kLlama, DType::F32);
  const GenerationFootprint f =
      generation_footprint(model, DType::F32, batch, longest, longest + max_new_tokens);
  int64_t bytes = f.kv_cache + f.working - 1;
  for (const exec::StageBytes& s : f.stages) bytes += s.own;
  return fmt::format("{:.9f}", static_cast<double>(bytes) / 1e9);
}

// On the CPU, --device-memory-gb streams the blocks that do not fit through
// the stand-in device (generate and eval --task math); the tokens are the
// resident model's.
TEST_F(GenerateCommand, ACapStreamsTheBlocksAndKeepsTheTokens) {
  const std::vector<std::vector<int32_t>> prompts = {{5, 9}, {1, 2, 3, 4, 5, 6, 7}};
  const auto data =
      write("ids.jsonl", "{\"input_ids\": [5, 9]}\n{\"input_ids\": [1, 2, 3, 4, 5, 6, 7]}\n");
  const std::string args = "generate --data " + data.string() +
                           " --max-new-tokens 9 --batch-size 2 --device cpu --device-memory-gb " +
                           streaming_cap(2, 7, 9);
  const CliResult r = run(args + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  // What streams is said under --json too, on stderr (the README's claim).
  EXPECT_NE(r.err.find("streaming 2 of 2 blocks"), std::string::npos) << r.err;
  GenerationOptions options;
  options.max_new_tokens = 9;
  options.eos_ids = {kFolderEos};
  const std::vector<Generation> want =
      generate(io::load_hf_model(kLlama, DType::F32), prompts, options);
  std::istringstream lines(r.out);
  std::string line;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::getline(lines, line));
    EXPECT_EQ(nlohmann::json::parse(line).at("output_ids").get<std::vector<int32_t>>(),
              want[i].tokens)
        << i;
  }
  const CliResult told = run(args);
  ASSERT_EQ(told.status, 0) << told.err;
  EXPECT_NE(told.err.find("streaming 2 of 2 blocks"), std::string::npos) << told.err;

  // eval --task math: the same outputs with and without the cap.
  const auto math = write("math.jsonl",
                          "{\"question\": \"1+1\", \"answer\": \"#### 2\"}\n"
                          "{\"question\": \"what is 7*8\", \"answer\": \"#### 56\"}\n");
  const std::string eval = "eval --task math --data " + math.string() +
                           " --max-new-tokens 12 --batch-size 2 --device cpu --out ";
  const CliResult plain = run(eval + (dir_ / "plain.jsonl").string());
  const CliResult capped =
      run(eval + (dir_ / "capped.jsonl").string() + " --device-memory-gb " +
          streaming_cap(2, static_cast<int64_t>(plain_prompt("what is 7*8").size()), 12));
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(capped.status, 0) << capped.err;
  EXPECT_NE(capped.err.find("streaming"), std::string::npos) << capped.err;
  std::ifstream a(dir_ / "plain.jsonl"), b(dir_ / "capped.jsonl");
  std::stringstream sa, sb;
  sa << a.rdbuf();
  sb << b.rdbuf();
  EXPECT_EQ(sa.str(), sb.str());
  EXPECT_FALSE(sa.str().empty());
}

TEST_F(GenerateCommand, ACapTooSmallToStreamIsRefusedNamingIt) {
  const CliResult r = run("generate --prompt hi --device cpu --device-memory-gb 0.000001");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--device-memory-gb 1e-06 (1000 bytes) is too small"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--batch-size"), std::string::npos) << r.err;
  const auto data = write("q.jsonl", "{\"question\": \"hi\", \"answer\": \"#### 3\"}\n");
  const CliResult math =
      run("eval --task math --data " + data.string() + " --device cpu --device-memory-gb 0.000001");
  EXPECT_NE(math.status, 0);
  EXPECT_NE(math.err.find("--device-memory-gb 1e-06"), std::string::npos) << math.err;
  const CliResult negative = run("generate --prompt hi --device-memory-gb -1");
  EXPECT_NE(negative.status, 0);
  EXPECT_NE(negative.err.find("--device-memory-gb must be"), std::string::npos) << negative.err;
}

}  // namespace
}  // namespace lt::train
