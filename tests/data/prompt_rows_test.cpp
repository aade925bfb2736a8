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
#include <string>
#include <variant>
#include <vector>

#include "core/error.h"
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
  // As messages name it (eval's "answers from ..."): a field, or the turn.
  EXPECT_EQ(gsm.reference_source(), "the field \"answer\"");
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

// The last assistant turn of a sharegpt row is its reference, named so in
// eval's messages (it printed as a field called "(the last assistant turn)").
TEST(PromptRows, AConversationsReferenceIsItsLastAssistantTurn) {
  const ScratchFiles files;
  PromptOptions options;
  options.tokenizer_path = testing::fixtures_dir() / "gpt2";
  const PromptSet turns =
      load_prompts(files.write("chat.jsonl",
                               "{\"messages\": [{\"role\": \"user\", \"content\": \"1+1?\"}, "
                               "{\"role\": \"assistant\", \"content\": \"2\"}]}\n"),
                   &testing::reference_tokenizer("gpt2"), options);
  ASSERT_EQ(turns.rows.size(), 1u);
  EXPECT_EQ(turns.rows.front().reference, "2");
  EXPECT_EQ(turns.reference_source(), "the last assistant turn");
}

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

// Token rows saved from transformers' tokenizer(..., padding=...) mark
// their pad tokens 0 in attention_mask. train leaves that padding out
// (rows::attended_span); generate and eval used to prompt with it, the
// pads before or after the question. A mask train refuses (a hole, a
// length or value it cannot read) is a bad row here too, named alike.
TEST(PromptRows, TokenRowsLeaveOutTheMaskedPadding) {
  const ScratchFiles files;
  const fs::path file = files.write(
      "padded.jsonl",
      "{\"input_ids\": [50256, 50256, 15, 16, 17], \"attention_mask\": [0, 0, 1, 1, 1]}\n"
      "{\"input_ids\": [15, 16, 50256], \"attention_mask\": [1, 1, 0]}\n"
      "{\"input_ids\": [15, 16]}\n"
      "{\"input_ids\": [5, 0, 7], \"attention_mask\": [1, 0, 1]}\n"
      "{\"input_ids\": [5, 6], \"attention_mask\": [1]}\n"
      "{\"input_ids\": [5, 6], \"attention_mask\": [1, 2]}\n"
      "{\"input_ids\": [0, 0], \"attention_mask\": [0, 0]}\n");
  const PromptSet prompts = load_prompts(file, nullptr, {});
  EXPECT_EQ(prompts.format, "tokens");
  ASSERT_EQ(prompts.rows.size(), 3u);
  EXPECT_EQ(prompts.rows[0].ids, (std::vector<int32_t>{15, 16, 17}));
  EXPECT_EQ(prompts.rows[1].ids, (std::vector<int32_t>{15, 16}));
  EXPECT_EQ(prompts.rows[2].ids, (std::vector<int32_t>{15, 16}));
  EXPECT_EQ(prompts.skipped, 4);
  const std::string f = file.string();
  EXPECT_EQ(prompts.problems,
            (std::vector<std::string>{
                f + ":4: field \"attention_mask[1]\": 0 between attended tokens (1): only "
                    "padding at either end of a row is left out",
                f + ":5: field \"attention_mask\": expected a list as long as input_ids (2), "
                    "found 1 items",
                f + ":6: field \"attention_mask[1]\": expected 0 or 1, found 2",
                f + ":7: field \"attention_mask\": every token is padding (0)",
            }));
  // The rows train skips are these four too.
  DatasetOptions train;
  train.accept_mostly_bad = true;
  DatasetReport report;
  load_dataset(file, nullptr, train, &report);
  EXPECT_EQ(report.skipped, 4);
}

// A math row whose question or answer holds text no JSON reader takes
// (invalid UTF-8, half a surrogate pair) was skipped as "not valid JSON
// (parse error ...)" with the parser's bytes, where train names the field
// and the byte: the prompts read rows as train reads them.
TEST(PromptRows, ABadMathFieldIsNamed) {
  const ScratchFiles files;
  const fs::path file = files.write("math.jsonl",
                                    "{\"question\": \"1+1?\", \"answer\": \"2\"}\n"
                                    "{\"question\": \"caf\xff\", \"answer\": \"2\"}\n"
                                    "{\"question\": \"q\", \"answer\": \"a\\ud800b\"}\n"
                                    "{\"question\": \"q\",\n");
  const PromptSet prompts =
      load_prompts(file, &testing::reference_tokenizer("qwen3"), qwen3_options());
  ASSERT_EQ(prompts.rows.size(), 1u);
  const std::string f = file.string();
  ASSERT_EQ(prompts.problems.size(), 3u);
  EXPECT_EQ(prompts.problems[0],
            f + ":2: field \"question\": invalid UTF-8 (byte 0xFF at column 18)");
  EXPECT_EQ(prompts.problems[1],
            f + ":3: field \"answer\": lone surrogate escape \\ud800 at column "
                "31 (half of a UTF-16 pair, not a character)");
  EXPECT_NE(prompts.problems[2].find(":4: not valid JSON ("), std::string::npos)
      << prompts.problems[2];
  EXPECT_NE(prompts.problems[2].find("the line ends inside the object"), std::string::npos)
      << prompts.problems[2];
}

// The ids of `pieces` in order: a special id as it is, text encoded.
std::vector<int32_t> ids_of(const Tokenizer& tokenizer,
                            const std::vector<std::variant<int32_t, std::string>>& pieces) {
  std::vector<int32_t> ids;
  for (const auto& piece : pieces) {
    if (const int32_t* id = std::get_if<int32_t>(&piece)) {
      ids.push_back(*id);
      continue;
    }
    for (uint32_t id : tokenizer.encode(std::get<std::string>(piece)))
      ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// LLaMA-Factory's alpaca "history" ([instruction, response] pairs) are the
// turns before the row's own: the prompt asks the row's instruction after
// them. They were dropped, the model asked without the conversation.
TEST(PromptRows, AlpacaHistoryTurnsComeFirst) {
  const ScratchFiles files;
  const fs::path file = files.write(
      "history.jsonl",
      "{\"system\": \"Be brief.\", \"instruction\": \"Second?\", \"input\": \"x\", \"output\": "
      "\"Two.\", \"history\": [[\"First?\", \"One.\"]]}\n"
      "{\"instruction\": \"Hi\", \"output\": \"Hello\", \"history\": \"First?\"}\n"
      "{\"instruction\": \"Hi\", \"output\": \"Hello\", \"history\": [[\"First?\"]]}\n"
      "{\"instruction\": \"Hi\", \"output\": \"Hello\", \"history\": [[\"First?\", 1]]}\n"
      "{\"instruction\": \"Hi\", \"output\": \"Hello\", \"history\": []}\n");
  // Qwen3's own template: ChatML turns, the last answer after an empty
  // think block (as transformers renders the generation prompt).
  constexpr int32_t kImEnd = 151645, kNewline = 198, kSystem = 8948, kUser = 872,
                    kAssistant = 77091, kThink = 151667, kThinkEnd = 151668, kTwoNewlines = 271;
  const Tokenizer& qwen = testing::reference_tokenizer("qwen3");
  const PromptSet prompts = load_prompts(file, &qwen, qwen3_options());
  EXPECT_EQ(prompts.format, "alpaca");
  ASSERT_EQ(prompts.rows.size(), 2u);
  EXPECT_EQ(
      prompts.rows[0].ids,
      ids_of(qwen, {kImStart,    kSystem,    kNewline, "Be brief.",  kImEnd,       kNewline,  //
                    kImStart,    kUser,      kNewline, "First?",     kImEnd,       kNewline,  //
                    kImStart,    kAssistant, kNewline, "One.",       kImEnd,       kNewline,  //
                    kImStart,    kUser,      kNewline, "Second?\nx", kImEnd,       kNewline,  //
                    kImStart,    kAssistant, kNewline, kThink,       kTwoNewlines, kThinkEnd,
                    kTwoNewlines}));
  EXPECT_EQ(prompts.rows[0].reference, "Two.");
  EXPECT_EQ(prompts.rows[1].line, 5);  // an empty history adds no turn
  EXPECT_EQ(prompts.rows[1].ids,
            ids_of(qwen, {kImStart, kUser, kNewline, "Hi", kImEnd, kNewline, kImStart, kAssistant,
                          kNewline, kThink, kTwoNewlines, kThinkEnd, kTwoNewlines}));
  const std::string f = file.string();
  EXPECT_EQ(prompts.problems,
            (std::vector<std::string>{
                f + ":2: field \"history\": expected a list of [instruction, response] pairs, "
                    "found string",
                f + ":3: field \"history[0]\": expected a pair [instruction, response], found "
                    "[\"First?\"]",
                f + ":4: field \"history[0][1]\": expected a string, found number",
            }));

  // Without a chat template (GPT-2's: the plain layout), the turns as the
  // plain layout writes a conversation: each prompt line, each answer and EOS.
  const Tokenizer& gpt2 = testing::reference_tokenizer("gpt2");
  PromptOptions plain;
  plain.tokenizer_path = testing::fixtures_dir() / "gpt2";
  const PromptSet plain_prompts = load_prompts(file, &gpt2, plain);
  EXPECT_EQ(plain_prompts.template_name, "plain");
  ASSERT_EQ(plain_prompts.rows.size(), 2u);
  EXPECT_EQ(plain_prompts.rows[0].ids,
            ids_of(gpt2, {"Be brief.\nFirst?\n", "One.", 50256, "Second?\nx\n"}));
}

// The format comes from the first row with fields: an empty object first
// (an export's placeholder) refused the whole file, "cannot tell the prompt
// format from the fields []". It is a bad row of the format the next rows
// have; blank lines are no rows at all, as train reads them.
TEST(PromptRows, AnEmptyFirstRowIsABadRow) {
  const ScratchFiles files;
  const fs::path file = files.write("empty_first.jsonl",
                                    " \t\n"
                                    "{}\n"
                                    "{\"instruction\": \"Add 2 and 2.\", \"output\": \"4\"}\n"
                                    "{}\n"
                                    "{\"instruction\": \"Add 3 and 2.\", \"output\": \"5\"}\n");
  const PromptSet prompts =
      load_prompts(file, &testing::reference_tokenizer("qwen3"), qwen3_options());
  EXPECT_EQ(prompts.format, "alpaca");
  EXPECT_EQ(prompts.read, 4);
  ASSERT_EQ(prompts.rows.size(), 2u);
  EXPECT_EQ(prompts.rows[0].line, 3);
  EXPECT_EQ(prompts.rows[1].line, 5);
  const std::string f = file.string();
  EXPECT_EQ(prompts.problems, (std::vector<std::string>{f + ":2: field \"instruction\": missing",
                                                        f + ":4: field \"instruction\": missing"}));

  const fs::path array =
      files.write("empty_first.json", "[{}, {\"question\": \"1+1?\", \"answer\": \"2\"}]\n");
  const PromptSet from_array =
      load_prompts(array, &testing::reference_tokenizer("qwen3"), qwen3_options());
  EXPECT_EQ(from_array.format, "query_response");
  EXPECT_EQ(from_array.rows.size(), 1u);
  EXPECT_EQ(from_array.skipped, 1);

  const fs::path only_empty = files.write("only_empty.jsonl", "{}\n{}\n");
  try {
    load_prompts(only_empty, &testing::reference_tokenizer("qwen3"), qwen3_options());
    ADD_FAILURE() << "expected an lt::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              only_empty.string() +
                  ": no usable prompt (2 rows, 2 skipped; first problem: " + only_empty.string() +
                  ":1: an empty object, and no row has a field to tell the format from)");
  }
}

}  // namespace
}  // namespace lt::data
