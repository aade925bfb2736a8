// Prompts for generation against two outside references: transformers'
// own rendering of Qwen3's chat template (chat_template_goldens.json: the
// prompt is the conversation up to where the last assistant turn's
// trained tokens begin, i.e. what apply_chat_template(...,
// add_generation_prompt=True, enable_thinking=False) renders), and the
// training loader (load_dataset): each row's prompt is exactly the ids the
// training sample holds before its response.
#include "data/prompt_rows.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "data/dataset.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;

// Prompt options that read the qwen3 fixture's tokenizer folder (its chat
// template), as eval and generate do for a checkpoint.
PromptOptions qwen3_options() {
  PromptOptions options;
  options.tokenizer_path = testing::fixtures_dir() / "qwen3";
  return options;
}

constexpr int32_t kImStart = 151644;

TEST(PromptRows, Qwen3PromptsAreTransformersGenerationPrompts) {
  std::ifstream in(testing::fixtures_dir() / "chat_template_goldens.json");
  const nlohmann::json goldens = nlohmann::json::parse(in);
  const Tokenizer& tokenizer = testing::reference_tokenizer("qwen3");
  const PromptRenderer renderer(tokenizer, testing::fixtures_dir() / "qwen3", "auto");
  EXPECT_EQ(renderer.template_name(), "jinja");  // Qwen3's own template
  int checked = 0;
  for (const auto& c : goldens.at("cases")) {
    const auto& messages = c.at("messages");
    if (messages.back().at("role") != "assistant") continue;
    // A final answer with reasoning trains its think block, so the
    // reference cut falls before "<think>"; the prompt here is the
    // enable_thinking=False one, with the empty block (chat_template.h).
    if (messages.back().at("content").get<std::string>().find("</think>") != std::string::npos)
      continue;
    std::vector<ChatMessage> turns;
    for (size_t i = 0; i + 1 < messages.size(); ++i) {
      const std::string role = messages[i].at("role");
      turns.push_back({role == "system" ? Role::kSystem
                       : role == "user" ? Role::kUser
                                        : Role::kAssistant,
                       messages[i].at("content")});
    }
    // The reference prompt: transformers' ids up to the first trained
    // label of the last assistant turn (the last <|im_start|>).
    const std::vector<int32_t> ids = c.at("ids"), labels = c.at("labels");
    size_t cut = ids.size();
    for (size_t i = ids.size(); i-- > 0;) {
      if (ids[i] == kImStart) {
        cut = i;
        break;
      }
    }
    while (cut < ids.size() && labels[cut] == kIgnoreLabel) ++cut;
    EXPECT_EQ(renderer.chat(turns), std::vector<int32_t>(ids.begin(), ids.begin() + cut))
        << c.at("name");
    ++checked;
  }
  EXPECT_GT(checked, 3);
  EXPECT_EQ(renderer.turn_end(), tokenizer.token_to_id("<|im_end|>"));
}

// The prompt of every row equals the training sample's ids before its
// first trained token, for each chat format and template.
void expect_training_prefixes(const fs::path& file, const std::string& tokenizer_name,
                              const fs::path& tokenizer_path, const std::string& template_name) {
  const Tokenizer& tokenizer = testing::reference_tokenizer(tokenizer_name);
  DatasetOptions train;
  train.template_name = template_name;
  train.tokenizer_path = tokenizer_path;
  const std::vector<Sample> samples = load_dataset(file, &tokenizer, train, nullptr);
  PromptOptions options;
  options.template_name = template_name;
  options.tokenizer_path = tokenizer_path;
  const PromptSet prompts = load_prompts(file, &tokenizer, options);
  ASSERT_EQ(prompts.rows.size(), samples.size()) << file;
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    size_t first = 0;
    while (first < s.labels.size() && s.labels[first] == kIgnoreLabel) ++first;
    EXPECT_EQ(prompts.rows[i].ids, std::vector<int32_t>(s.ids.begin(), s.ids.begin() + first))
        << file << " row " << i << " template " << template_name;
    EXPECT_EQ(prompts.rows[i].line, s.line);
    ASSERT_TRUE(prompts.rows[i].reference.has_value());
  }
}

TEST(PromptRows, EqualTheTrainingSamplesPrompts) {
  const fs::path data = testing::fixtures_dir() / "datasets";
  const fs::path qwen = testing::fixtures_dir() / "qwen3";
  const fs::path gpt2 = testing::fixtures_dir() / "gpt2";
  for (const char* file : {"gsm8k_train_head.jsonl", "alpaca.jsonl", "metamath.json"}) {
    expect_training_prefixes(data / file, "qwen3", qwen, "auto");
    expect_training_prefixes(data / file, "qwen3", qwen, "chatml");
    expect_training_prefixes(data / file, "gpt2", gpt2, "plain");
  }
}

TEST(PromptRows, ReferencesAndTokenRows) {
  const fs::path data = testing::fixtures_dir() / "datasets";
  const Tokenizer& tokenizer = testing::reference_tokenizer("gpt2");
  PromptOptions options;
  options.tokenizer_path = testing::fixtures_dir() / "gpt2";
  const PromptSet gsm = load_prompts(data / "gsm8k_train_head.jsonl", &tokenizer, options);
  EXPECT_EQ(gsm.format, "query_response");
  EXPECT_EQ(gsm.prompt_field, "question");
  EXPECT_EQ(gsm.reference_field, "answer");
  ASSERT_TRUE(gsm.rows.front().reference.has_value());
  EXPECT_NE(gsm.rows.front().reference->find("####"), std::string::npos);
  EXPECT_EQ(gsm.turn_end, tokenizer.token_to_id("<|endoftext|>"));

  const PromptSet tokens = load_prompts(data / "tokens.jsonl", nullptr, {});
  EXPECT_EQ(tokens.format, "tokens");
  EXPECT_FALSE(tokens.turn_end.has_value());
  EXPECT_FALSE(tokens.rows.front().reference.has_value());
}

// A scratch folder of this test process, removed with it.
class ScratchFiles {
 public:
  ScratchFiles()
      : dir_(fs::temp_directory_path() / ("lt_prompt_rows_" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
  }
  ~ScratchFiles() { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& contents) const {
    std::ofstream(dir_ / name, std::ios::binary) << contents;
    return dir_ / name;
  }

 private:
  fs::path dir_;
};

// The README's query_response pairs include prompt/response, which train
// reads (prompt -> response); the prompts' reference is that response, not
// a "completion" the rows do not have (eval --task math refused such a
// file: none of its rows has the field "completion").
TEST(PromptRows, PromptResponseRowsReferToTheirResponse) {
  const ScratchFiles files;
  const fs::path file =
      files.write("prompt_response.jsonl",
                  "{\"prompt\": \"What is 2 plus 2?\", \"response\": \"#### 4\"}\n"
                  "{\"prompt\": \"What is 3 plus 2?\", \"response\": \"#### 5\"}\n");
  const Tokenizer& tokenizer = testing::reference_tokenizer("qwen3");
  PromptOptions options = qwen3_options();
  const PromptSet prompts = load_prompts(file, &tokenizer, options);
  EXPECT_EQ(prompts.prompt_field, "prompt");
  EXPECT_EQ(prompts.reference_field, "response");
  ASSERT_EQ(prompts.rows.size(), 2u);
  EXPECT_EQ(prompts.rows[0].reference, "#### 4");
  EXPECT_EQ(prompts.rows[1].reference, "#### 5");
  expect_training_prefixes(file, "qwen3", testing::fixtures_dir() / "qwen3", "auto");

  // --response-field alone names the reference, as data.response_field
  // alone names train's response.
  options.response_field = "response";
  const fs::path both =
      files.write("both.jsonl", "{\"question\": \"q\", \"answer\": \"a\", \"response\": \"r\"}\n");
  const PromptSet named = load_prompts(both, &tokenizer, options);
  EXPECT_EQ(named.reference_field, "response");
  EXPECT_EQ(named.rows.front().reference, "r");
}

// A row train skips for a "system" or alpaca "input" that is not a string
// is skipped here too, naming the field, rather than prompted without it.
TEST(PromptRows, SkipTheRowsTrainSkips) {
  const ScratchFiles files;
  const fs::path alpaca = files.write(
      "alpaca.jsonl",
      "{\"instruction\": \"Add 2 and 2.\", \"input\": 5, \"output\": \"4\"}\n"
      "{\"instruction\": \"Add 3 and 2.\", \"input\": \"\", \"output\": \"5\"}\n"
      "{\"instruction\": \"Add 1 and 2.\", \"system\": [\"be brief\"], \"output\": \"3\"}\n"
      "{\"instruction\": \"Add 1 and 1.\", \"system\": \"Be brief.\", \"output\": \"2\"}\n"
      "{\"instruction\": \"Add 1 and 0.\", \"input\": \"now\", \"output\": \"1\"}\n");
  const Tokenizer& tokenizer = testing::reference_tokenizer("qwen3");
  DatasetOptions train;
  train.tokenizer_path = testing::fixtures_dir() / "qwen3";
  DatasetReport report;
  load_dataset(alpaca, &tokenizer, train, &report);
  ASSERT_EQ(report.skipped, 2);  // what train does with these rows

  const PromptSet prompts = load_prompts(alpaca, &tokenizer, qwen3_options());
  ASSERT_EQ(prompts.rows.size(), 3u);
  EXPECT_EQ(prompts.rows[0].line, 2);
  EXPECT_EQ(prompts.rows[1].line, 4);
  EXPECT_EQ(prompts.rows[2].line, 5);
  EXPECT_EQ(prompts.skipped, 2);
  ASSERT_EQ(prompts.problems.size(), 2u);
  EXPECT_NE(prompts.problems[0].find(":1: field \"input\": expected a string"), std::string::npos)
      << prompts.problems[0];
  EXPECT_NE(prompts.problems[1].find(":3: field \"system\": expected a string"), std::string::npos)
      << prompts.problems[1];
}

// A row that is not JSON is named with where it breaks, as train names it,
// not as "not valid JSON" alone.
TEST(PromptRows, ARowNotJsonSaysWhereItBreaks) {
  const ScratchFiles files;
  const fs::path rows = files.write("broken.jsonl",
                                    "{\"question\": \"1+1?\", \"answer\": \"2\"}\n"
                                    "{\"question\": \"2+2?\", \"answer\": }\n"
                                    "{\"question\": \"3+3?\", \"answer\": \"6\"}\n");
  const PromptSet prompts =
      load_prompts(rows, &testing::reference_tokenizer("qwen3"), qwen3_options());
  EXPECT_EQ(prompts.rows.size(), 2u);
  ASSERT_EQ(prompts.problems.size(), 1u);
  // The value missing after "answer": the "}" in column 32, as train says.
  EXPECT_NE(prompts.problems[0].find(":2: not valid JSON (parse error at line 1, column 32: "),
            std::string::npos)
      << prompts.problems[0];
}

}  // namespace
}  // namespace lt::data
