// Dataset formats against hand-built expected ids and labels: known ids for
// the special tokens, the text pieces encoded one by one with the tokenizer
// (checked against Hugging Face elsewhere). What is checked here is which
// text goes where, the masks, and the handling of bad rows.
#include "data/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/token_rows.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using testing::fixtures_dir;
using testing::reference_tokenizer;

constexpr uint32_t kImStart = 151644, kImEnd = 151645, kThink = 151667,
                   kThinkEnd = 151668;  // Qwen3
constexpr uint32_t kQwenNewline = 198, kQwenUser = 872, kQwenAssistant = 77091, kQwenSystem = 8948;
constexpr uint32_t kGpt2Eos = 50256;

fs::path data_file(const std::string& name) {
  return fixtures_dir() / "datasets" / name;
}

struct Expected {
  explicit Expected(const Tokenizer& t, bool all_trained = false)
      : tokenizer(t), train_on_prompt(all_trained) {}
  const Tokenizer& tokenizer;
  bool train_on_prompt;
  Sample sample;

  Expected& add(uint32_t id, bool trained) {
    sample.ids.push_back(static_cast<int32_t>(id));
    sample.labels.push_back(trained || train_on_prompt ? static_cast<int32_t>(id) : kIgnoreLabel);
    return *this;
  }
  Expected& masked(uint32_t id) { return add(id, false); }
  Expected& trained(uint32_t id) { return add(id, true); }
  Expected& masked(const std::string& text) {
    for (uint32_t id : tokenizer.encode(text)) add(id, false);
    return *this;
  }
  Expected& trained(const std::string& text) {
    for (uint32_t id : tokenizer.encode(text)) add(id, true);
    return *this;
  }
  // One ChatML turn: <|im_start|>role\n content <|im_end|> \n.
  Expected& chatml(uint32_t role_id, const std::string& content, bool assistant) {
    masked(kImStart).masked(role_id).masked(kQwenNewline);
    if (assistant) {
      trained(content).trained(kImEnd);
    } else {
      masked(content).masked(kImEnd);
    }
    return masked(kQwenNewline);
  }
  // The final assistant turn as Qwen3's template renders it (what "auto"
  // picks for Qwen3's tokenizer_config.json): an empty think block, masked,
  // before the answer. 271 is "\n\n".
  Expected& qwen3_final_answer(const std::string& content) {
    masked(kImStart).masked(kQwenAssistant).masked(kQwenNewline);
    masked(kThink).masked(271).masked(kThinkEnd).masked(271);
    return trained(content).trained(kImEnd).masked(kQwenNewline);
  }
};

void expect_sample(const Sample& actual, const Sample& expected, const std::string& what) {
  EXPECT_EQ(actual.ids, expected.ids) << what;
  EXPECT_EQ(actual.labels, expected.labels) << what;
}

DatasetOptions qwen_options() {
  DatasetOptions options;
  options.tokenizer_path = fixtures_dir() / "qwen3";
  return options;
}

// The message of the lt::Error `fn` throws ("" and a test failure if none).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an lt::Error";
  return {};
}

class TempDir {
 public:
  TempDir() : dir_(fs::temp_directory_path() / ("lazytrain_dataset_" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& contents) const {
    std::ofstream(dir_ / name, std::ios::binary) << contents;
    return dir_ / name;
  }

 private:
  fs::path dir_;
};

TEST(Dataset, AlpacaWithTheQwen3Template) {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  DatasetReport report;
  std::vector<Sample> samples =
      load_dataset(data_file("alpaca.jsonl"), &qwen, qwen_options(), &report);
  EXPECT_EQ(report.format, "alpaca");
  EXPECT_EQ(report.template_name, "jinja");  // Qwen3's own tokenizer_config.json template
  EXPECT_EQ(report.rows, 3);
  EXPECT_EQ(report.samples, 3);
  EXPECT_EQ(report.skipped, 0);
  ASSERT_EQ(samples.size(), 3u);

  Expected first(qwen);  // "input": "" adds nothing
  first.chatml(kQwenUser, "Give three tips for staying healthy.", false)
      .qwen3_final_answer("Eat well, sleep, move.");
  expect_sample(samples[0], first.sample, "row 1");

  Expected second(qwen);  // instruction + "\n" + input
  second.chatml(kQwenUser, "Translate to French.\nGood morning", false)
      .qwen3_final_answer("Bonjour");
  expect_sample(samples[1], second.sample, "row 2");

  Expected third(qwen);  // the optional system field
  third.chatml(kQwenSystem, "You are terse.", false)
      .chatml(kQwenUser, "Say hi.", false)
      .qwen3_final_answer("Hi!");
  expect_sample(samples[2], third.sample, "row 3");

  int64_t tokens = 0, trained = 0;
  for (const Sample& s : samples) {
    tokens += static_cast<int64_t>(s.ids.size());
    for (int32_t label : s.labels) trained += label != kIgnoreLabel;
  }
  EXPECT_EQ(report.tokens, tokens);
  EXPECT_EQ(report.trained_tokens, trained);
}

TEST(Dataset, TrainOnPromptTrainsEveryToken) {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  DatasetOptions options = qwen_options();
  options.train_on_prompt = true;
  std::vector<Sample> all = load_dataset(data_file("alpaca.jsonl"), &qwen, options, nullptr);
  std::vector<Sample> masked =
      load_dataset(data_file("alpaca.jsonl"), &qwen, qwen_options(), nullptr);
  ASSERT_EQ(all.size(), masked.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].ids, masked[i].ids);
    EXPECT_EQ(all[i].labels, all[i].ids);
  }
  Expected second(qwen, true);
  second.chatml(kQwenUser, "Translate to French.\nGood morning", false)
      .qwen3_final_answer("Bonjour");
  expect_sample(all[1], second.sample, "row 2");
}

TEST(Dataset, MetaMathJsonArrayWithGpt2Plain) {
  // No tokenizer_path: no config, so the plain template and GPT-2's
  // <|endoftext|> as EOS.
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(data_file("metamath.json"), &gpt2, {}, &report);
  EXPECT_EQ(report.format, "query_response");
  EXPECT_EQ(report.prompt_field, "query");
  EXPECT_EQ(report.response_field, "response");
  EXPECT_EQ(report.template_name, "plain");
  ASSERT_EQ(samples.size(), 2u);
  Expected first(gpt2);
  first.masked("What is 2 + 3?")
      .masked("\n")
      .trained("2 + 3 = 5.\nThe answer is: 5")
      .trained(kGpt2Eos);
  expect_sample(samples[0], first.sample, "element 1");
  Expected second(gpt2);
  second.masked("If x = 4, what is 2x?\n").trained("2x = 8.\nThe answer is: 8").trained(kGpt2Eos);
  expect_sample(samples[1], second.sample, "element 2");
}

TEST(Dataset, Gsm8kFirstRows) {
  // The first three rows of GSM8K's train.jsonl, as released.
  std::vector<std::pair<std::string, std::string>> rows;
  std::ifstream in(data_file("gsm8k_train_head.jsonl"));
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    rows.emplace_back(j["question"], j["answer"]);
  }
  ASSERT_EQ(rows.size(), 3u);
  ASSERT_TRUE(rows[0].first.starts_with("Natalia sold clips to 48 of her friends in April"));
  ASSERT_TRUE(rows[0].second.ends_with("#### 72"));

  const Tokenizer& qwen = reference_tokenizer("qwen3");
  DatasetReport report;
  std::vector<Sample> samples =
      load_dataset(data_file("gsm8k_train_head.jsonl"), &qwen, qwen_options(), &report);
  EXPECT_EQ(report.format, "query_response");
  EXPECT_EQ(report.prompt_field, "question");
  EXPECT_EQ(report.response_field, "answer");
  EXPECT_EQ(report.template_name, "jinja");
  ASSERT_EQ(samples.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    Expected e(qwen);
    e.chatml(kQwenUser, rows[i].first, false).qwen3_final_answer(rows[i].second);
    expect_sample(samples[i], e.sample, "row " + std::to_string(i + 1));
  }
  // The answer's first ids, by hand: "Natalia" " sold" " " "4" "8" "/" "2" ...
  // sit right after "<|im_start|>assistant\n".
  const std::vector<int32_t>& ids = samples[0].ids;
  auto start = std::find(ids.begin() + 1, ids.end(), static_cast<int32_t>(kImStart));
  ASSERT_NE(start, ids.end());
  ASSERT_EQ(*(start + 1), static_cast<int32_t>(kQwenAssistant));
  // <|im_start|> "assistant" "\n" <think> "\n\n" </think> "\n\n": 7 ids.
  const size_t answer_at = static_cast<size_t>(start - ids.begin()) + 7;
  EXPECT_EQ(samples[0].labels[answer_at - 1], kIgnoreLabel);
  EXPECT_EQ(samples[0].labels[answer_at], ids[answer_at]);
  EXPECT_EQ(qwen.decode(std::vector<uint32_t>(ids.begin() + answer_at, ids.end())),
            rows[0].second + "<|im_end|>\n");

  // GPT-2, plain: question "\n" answer <|endoftext|>.
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  std::vector<Sample> plain = load_dataset(data_file("gsm8k_train_head.jsonl"), &gpt2, {}, nullptr);
  ASSERT_EQ(plain.size(), 3u);
  Expected e(gpt2);
  e.masked(rows[0].first).masked("\n").trained(rows[0].second).trained(kGpt2Eos);
  expect_sample(plain[0], e.sample, "gpt2 row 1");
  EXPECT_EQ(gpt2.decode(std::vector<uint32_t>(plain[0].ids.begin(), plain[0].ids.end())),
            rows[0].first + "\n" + rows[0].second + "<|endoftext|>");
}

TEST(Dataset, PromptCompletionWithThePlainTemplateAndTheConfigEos) {
  // template plain, but Qwen3's tokenizer_config.json names <|im_end|> as EOS.
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  DatasetOptions options = qwen_options();
  options.template_name = "plain";
  DatasetReport report;
  std::vector<Sample> samples =
      load_dataset(data_file("prompt_completion.jsonl"), &qwen, options, &report);
  EXPECT_EQ(report.prompt_field, "prompt");
  EXPECT_EQ(report.response_field, "completion");
  EXPECT_EQ(report.template_name, "plain");
  ASSERT_EQ(samples.size(), 2u);
  Expected e(qwen);
  e.masked("The capital of France is").masked("\n").trained(" Paris.").trained(kImEnd);
  expect_sample(samples[0], e.sample, "row 1");
}

TEST(Dataset, FieldNamesCanBeGiven) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetOptions options;
  options.prompt_field = "original_question";
  options.response_field = "response";
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(data_file("metamath.json"), &gpt2, options, &report);
  EXPECT_EQ(report.format, "query_response");
  EXPECT_EQ(report.prompt_field, "original_question");
  ASSERT_EQ(samples.size(), 2u);
  Expected e(gpt2);
  e.masked("Add 2 and 3.\n").trained("2 + 3 = 5.\nThe answer is: 5").trained(kGpt2Eos);
  expect_sample(samples[0], e.sample, "element 1");

  // Only one given: the other is detected.
  options.prompt_field.clear();
  options.response_field = "answer";
  load_dataset(data_file("gsm8k_train_head.jsonl"), &gpt2, options, &report);
  EXPECT_EQ(report.prompt_field, "question");
  EXPECT_EQ(report.response_field, "answer");

  // A name the rows lack makes every row bad.
  options.prompt_field = "problem";
  std::string error =
      error_of([&] { load_dataset(data_file("gsm8k_train_head.jsonl"), &gpt2, options, &report); });
  EXPECT_NE(error.find("no usable samples"), std::string::npos) << error;
  EXPECT_NE(error.find("gsm8k_train_head.jsonl:1: field \"problem\": missing"), std::string::npos)
      << error;
}

TEST(Dataset, ShareGptMultiTurnTrainsOnlyTheAssistant) {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  DatasetReport report;
  std::vector<Sample> samples =
      load_dataset(data_file("sharegpt.jsonl"), &qwen, qwen_options(), &report);
  EXPECT_EQ(report.format, "sharegpt");
  ASSERT_EQ(samples.size(), 2u);
  Expected first(qwen);
  first.chatml(kQwenSystem, "You are helpful.", false)
      .chatml(kQwenUser, "Hi", false)
      .chatml(kQwenAssistant, "Hello! How can I help?", true)
      .chatml(kQwenUser, "What is 1+1?", false)
      .qwen3_final_answer("2");
  expect_sample(samples[0], first.sample, "row 1");
  Expected second(qwen);
  second.chatml(kQwenUser, "Bye", false).qwen3_final_answer("Goodbye.");
  expect_sample(samples[1], second.sample, "row 2");

  // train_on_prompt: the same ids, all trained.
  DatasetOptions options = qwen_options();
  options.train_on_prompt = true;
  std::vector<Sample> all = load_dataset(data_file("sharegpt.jsonl"), &qwen, options, nullptr);
  EXPECT_EQ(all[0].ids, samples[0].ids);
  EXPECT_EQ(all[0].labels, all[0].ids);
}

TEST(Dataset, MessagesWithRolesAndGpt2Plain) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(data_file("messages.jsonl"), &gpt2, {}, &report);
  EXPECT_EQ(report.format, "sharegpt");
  ASSERT_EQ(samples.size(), 1u);
  Expected e(gpt2);
  e.masked("Name a color.\n").trained("Blue.").trained(kGpt2Eos);
  expect_sample(samples[0], e.sample, "row 1");
}

TEST(Dataset, TextRowsEndWithEos) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(data_file("text.jsonl"), &gpt2, {}, &report);
  EXPECT_EQ(report.format, "text");
  EXPECT_EQ(report.template_name, "");
  ASSERT_EQ(samples.size(), 2u);
  // GPT-2: "The"=464 " quick"=2068 " brown"=7586 " fox"=21831 "."=13.
  EXPECT_EQ(samples[0].ids, (std::vector<int32_t>{464, 2068, 7586, 21831, 13, 50256}));
  EXPECT_EQ(samples[0].labels, samples[0].ids);
  Expected e(gpt2);
  e.trained("Jumps over\nthe lazy dog.").trained(kGpt2Eos);
  expect_sample(samples[1], e.sample, "row 2");
}

TEST(Dataset, TextFileIsOneSamplePerParagraph) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(data_file("paragraphs.txt"), &gpt2, {}, &report);
  EXPECT_EQ(report.format, "text");
  EXPECT_EQ(report.rows, 3);
  ASSERT_EQ(samples.size(), 3u);
  const char* paragraphs[] = {"First paragraph,\ntwo lines.", "Second paragraph.", "Third."};
  for (int i = 0; i < 3; ++i) {
    Expected e(gpt2);
    e.trained(paragraphs[i]).trained(kGpt2Eos);
    expect_sample(samples[i], e.sample, paragraphs[i]);
  }
  DatasetOptions options;
  options.format = "alpaca";
  EXPECT_THROW(load_dataset(data_file("paragraphs.txt"), &gpt2, options, nullptr), Error);
}

// A .txt saved on Windows (CRLF, a lone CR too) gives the samples Python's
// universal newlines give (what Hugging Face's text loader reads): every
// line break '\n'. Each line but a paragraph's last kept its '\r' as a
// token before.
TEST(Dataset, ATextFileWithCrlfLineBreaksReadsAsPython) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  TempDir dir;
  const fs::path file = dir.write(
      "windows.txt", "First paragraph,\r\ntwo lines.\r\n\r\nOld\rMac.\r\n \r\nThird.\r\n");
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(file, &gpt2, {}, &report);
  ASSERT_EQ(samples.size(), 3u);
  // open(file).read().split("\n\n") with the blank line " " between.
  const char* paragraphs[] = {"First paragraph,\ntwo lines.", "Old\nMac.", "Third."};
  for (int i = 0; i < 3; ++i) {
    Expected e(gpt2);
    e.trained(paragraphs[i]).trained(kGpt2Eos);
    expect_sample(samples[i], e.sample, paragraphs[i]);
  }
}

// The options of `tokenize --data`, which lists a file's problems however
// many: the tests below look at each bad row's report.
DatasetOptions listing() {
  DatasetOptions options;
  options.accept_mostly_bad = true;
  return options;
}

TEST(Dataset, TokensAsTheyAre) {
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(data_file("tokens.jsonl"), nullptr, {}, &report);
  EXPECT_EQ(report.format, "tokens");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(samples[0].labels, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(samples[1].ids, (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(samples[1].labels, (std::vector<int32_t>{-100, -100, 6, 7}));
  EXPECT_EQ(report.trained_tokens, 5);

  TempDir dir;
  fs::path file = dir.write("tokens.jsonl",
                            "{\"input_ids\": [1, 50257]}\n"               // past GPT-2's vocabulary
                            "{\"input_ids\": [1, 2], \"labels\": [1]}\n"  // length
                            "{\"input_ids\": [1, 2], \"labels\": [-100, -100]}\n"
                            "{\"input_ids\": []}\n"
                            "{\"input_ids\": [1, \"2\"]}\n"
                            "{\"input_ids\": [1, -3]}\n"
                            "{\"input_ids\": [1, 2], \"labels\": [-100, 2]}\n");
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  samples = load_dataset(file, &gpt2, listing(), &report);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].labels, (std::vector<int32_t>{-100, 2}));
  const std::string f = file.string();
  EXPECT_EQ(report.problems,
            (std::vector<std::string>{
                f + ":1: field \"input_ids[1]\": 50257 is outside the vocabulary [0, 50257)",
                f + ":2: field \"labels\": expected a list as long as input_ids (2), found 1 items",
                f + ":3: field \"labels\": every label is -100; nothing to train on",
                f + ":4: field \"input_ids\": empty",
                f + ":5: field \"input_ids[1]\": expected an integer token id, found string",
                f + ":6: field \"input_ids[1]\": -3 is outside the vocabulary [0, 50257)",
            }));
}

// Rows saved from transformers' tokenizer(..., padding=...) carry their pad
// tokens (here 0) marked 0 in attention_mask. Read as ids alone, the pads
// were trained on (no labels: every token a target), which transformers'
// collator masks. The padding at either end is left out, the labels with
// it; a 0 between 1s is not padding, and the row is refused. eval's reader
// (read_token_rows) leaves the same padding out.
TEST(Dataset, AttentionMaskPaddingIsLeftOut) {
  TempDir dir;
  const fs::path file =
      dir.write("padded.jsonl",
                "{\"input_ids\": [5, 6, 7, 0, 0], \"attention_mask\": [1, 1, 1, 0, 0]}\n"
                "{\"input_ids\": [0, 0, 8, 9], \"attention_mask\": [0, 0, 1, 1]}\n"
                "{\"input_ids\": [5, 6, 0], \"labels\": [-100, 6, -100], "
                "\"attention_mask\": [1, 1, 0]}\n"
                "{\"input_ids\": [5, 6, 7], \"attention_mask\": [1, 1, 1]}\n"
                "{\"input_ids\": [5, 0, 7], \"attention_mask\": [1, 0, 1]}\n"
                "{\"input_ids\": [5, 6], \"attention_mask\": [1]}\n"
                "{\"input_ids\": [5, 6], \"attention_mask\": [1, 2]}\n"
                "{\"input_ids\": [0, 0], \"attention_mask\": [0, 0]}\n");
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(file, nullptr, listing(), &report);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].ids, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(samples[0].labels, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(samples[1].ids, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(samples[1].labels, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(samples[2].ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(samples[2].labels, (std::vector<int32_t>{-100, 6}));
  EXPECT_EQ(samples[3].ids, (std::vector<int32_t>{5, 6, 7}));
  const std::string f = file.string();
  EXPECT_EQ(report.problems,
            (std::vector<std::string>{
                f + ":5: field \"attention_mask[1]\": 0 between attended tokens (1): only "
                    "padding at either end of a row is left out",
                f + ":6: field \"attention_mask\": expected a list as long as input_ids (2), "
                    "found 1 items",
                f + ":7: field \"attention_mask[1]\": expected 0 or 1, found 2",
                f + ":8: field \"attention_mask\": every token is padding (0)",
            }));

  const fs::path clean = dir.write("clean.jsonl",
                                   "{\"input_ids\": [5, 6, 7, 0, 0], \"attention_mask\": [1, 1, "
                                   "1, 0, 0]}\n{\"input_ids\": [0, 8, 9], \"attention_mask\": "
                                   "[0, 1, 1]}\n{\"input_ids\": [4, 5]}\n");
  EXPECT_EQ(read_token_rows(clean), (std::vector<TokenRow>{{5, 6, 7}, {8, 9}, {4, 5}}));
  const fs::path hole =
      dir.write("hole.jsonl", "{\"input_ids\": [5, 0, 7], \"attention_mask\": [1, 0, 1]}\n");
  EXPECT_EQ(error_of([&] { read_token_rows(hole); }),
            hole.string() +
                ":1: field \"attention_mask[1]\": 0 between attended tokens (1): "
                "only padding at either end of a row is left out");
  // A key given twice is refused there too, as training refuses the row.
  const fs::path twice = dir.write("twice.jsonl", "{\"input_ids\": [5, 6], \"input_ids\": [7]}\n");
  EXPECT_EQ(error_of([&] { read_token_rows(twice); }),
            twice.string() +
                ":1: has the key \"input_ids\" twice; a JSON reader keeps only the last value, so "
                "which one was meant cannot be told (give each key once)");
}

TEST(Dataset, BadRowsAreCountedAndReportedWithTheirLines) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetReport report;
  std::vector<Sample> samples =
      load_dataset(data_file("bad_rows.jsonl"), &gpt2, listing(), &report);
  EXPECT_EQ(report.rows, 9);  // the blank line 3 is not a row
  EXPECT_EQ(report.samples, 2);
  EXPECT_EQ(report.skipped, 7);
  ASSERT_EQ(samples.size(), 2u);
  Expected e(gpt2);
  e.masked("Q6?\n").trained("A6").trained(kGpt2Eos);
  expect_sample(samples[1], e.sample, "line 9");

  const std::string f = data_file("bad_rows.jsonl").string();
  ASSERT_EQ(report.problems.size(), 7u);
  EXPECT_EQ(report.problems[0], f + ":2: field \"answer\": empty response");
  EXPECT_EQ(report.problems[1], f + ":4: field \"answer\": missing");
  EXPECT_EQ(report.problems[2], f + ":5: field \"question\": expected a string, found number");
  EXPECT_TRUE(
      report.problems[3].starts_with(f + ":6: not valid JSON (parse error at line 1, column 35"))
      << report.problems[3];
  EXPECT_EQ(report.problems[4], f + ":7: field \"answer\": invalid UTF-8 (byte 0xFF at column 35)");
  EXPECT_EQ(report.problems[5], f + ":8: expected a JSON object, found array");
  EXPECT_EQ(report.problems[6], f + ":10: field \"answer\": null (expected a string)");
}

// A key given twice in one object was read as JSON parsers read it, the
// last value silently replacing the first: {"text": "a", "text": "b"}
// trained on "b" alone. Such a row is refused, naming its line and the
// key's path; the same key in sibling objects (every turn's "role") is fine.
TEST(Dataset, AKeyGivenTwiceInOneObjectRefusesTheRow) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  TempDir dir;
  const fs::path text =
      dir.write("twice.jsonl",
                "{\"text\": \"kept\"}\n"
                "{\"text\": \"first\", \"text\": \"second\"}\n"
                "{\"text\": \"also kept\", \"meta\": {\"id\": 1, \"id\": 2}}\n"
                "{\"text\": \"nested\", \"meta\": [{\"a\": 1}, {\"a\": 1, \"a\": 2}]}\n");
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(text, &gpt2, listing(), &report);
  EXPECT_EQ(samples.size(), 1u);
  const std::string f = text.string();
  const std::string why =
      " twice; a JSON reader keeps only the last value, so which one was meant cannot be told "
      "(give each key once)";
  EXPECT_EQ(report.problems, (std::vector<std::string>{
                                 f + ":2: has the key \"text\"" + why,
                                 f + ":3: has the key \"meta.id\"" + why,
                                 f + ":4: has the key \"meta[1].a\"" + why,
                             }));

  // Every turn of a conversation has "role" and "content": not a repeat.
  const fs::path chat =
      dir.write("chat.jsonl",
                "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                "{\"role\": \"assistant\", \"content\": \"Hello\"}]}\n"
                "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, "
                "{\"role\": \"assistant\", \"content\": \"Hello\", \"content\": \"Bye\"}]}\n");
  samples = load_dataset(chat, &gpt2, listing(), &report);
  EXPECT_EQ(samples.size(), 1u);
  EXPECT_EQ(
      report.problems,
      (std::vector<std::string>{chat.string() + ":2: has the key \"messages[1].content\"" + why}));

  // Token rows too: a second "input_ids" would replace the first list.
  const fs::path tokens = dir.write(
      "tokens.jsonl", "{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, 2], \"input_ids\": [3]}\n");
  samples = load_dataset(tokens, &gpt2, listing(), &report);
  EXPECT_EQ(samples.size(), 1u);
  EXPECT_EQ(report.problems,
            (std::vector<std::string>{tokens.string() + ":2: has the key \"input_ids\"" + why}));
}

TEST(Dataset, StrictRefusesTheFirstBadRow) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetOptions options;
  options.strict = true;
  std::string error =
      error_of([&] { load_dataset(data_file("bad_rows.jsonl"), &gpt2, options, nullptr); });
  EXPECT_EQ(error, data_file("bad_rows.jsonl").string() + ":2: field \"answer\": empty response");
  // A clean file loads the same with strict.
  EXPECT_EQ(load_dataset(data_file("alpaca.jsonl"), &gpt2, options, nullptr).size(), 3u);
}

TEST(Dataset, BrokenJsonArrayKeepsItsGoodElements) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(data_file("bad_array.json"), &gpt2, {}, &report);
  EXPECT_EQ(samples.size(), 2u);
  EXPECT_EQ(report.rows, 4);
  EXPECT_EQ(report.skipped, 2);
  const std::string f = data_file("bad_array.json").string();
  EXPECT_EQ(report.problems,
            (std::vector<std::string>{
                f + ":3: field \"completion\": missing",
                f + ":5: the file ends before the array's closing ']' (after " +
                    std::to_string(fs::file_size(data_file("bad_array.json"))) +
                    " bytes): it looks cut off; the rows before this one were read"}));
  // Cut inside a string, on one line (`head -c` of a file written without
  // newlines): the size says where, as line 1 cannot.
  TempDir dir;
  const std::string cut = "[{\"text\": \"a\"}, {\"text\": \"b";
  const fs::path one_line = dir.write("cut.json", cut);
  DatasetReport cut_report;
  EXPECT_EQ(load_dataset(one_line, &gpt2, {}, &cut_report).size(), 1u);
  EXPECT_EQ(
      cut_report.problems,
      (std::vector<std::string>{one_line.string() + ":1: the file ends inside a string (after " +
                                std::to_string(cut.size()) +
                                " bytes): it looks cut off; the rows before this one were "
                                "read"}));
}

// A JSON Lines file whose first line is an array looked like one JSON
// array: its other rows, a thousand here, were one "skipped" row and the
// run trained on the first line alone. Refused, naming the file and line.
TEST(Dataset, AJsonLinesFileWhoseFirstLineIsAnArrayIsRefused) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  TempDir dir;
  std::string rows = "[{\"text\": \"row a\"}]\n";
  for (int i = 0; i < 1000; ++i) rows += "{\"text\": \"row " + std::to_string(i) + "\"}\n";
  const fs::path file = dir.write("first_array.jsonl", rows);
  const std::string error = error_of([&] { load_dataset(file, &gpt2, {}, nullptr); });
  EXPECT_TRUE(error.starts_with(file.string() +
                                ":2: text after the closing ']' of the JSON array the file starts "
                                "with ("))
      << error;
  // A whole array with trailing blank lines still reads.
  const fs::path whole = dir.write("whole.json", "[{\"text\": \"a\"},\n {\"text\": \"b\"}]\n\n");
  EXPECT_EQ(load_dataset(whole, &gpt2, {}, nullptr).size(), 2u);
}

TEST(Dataset, BadConversationsNameTheTurn) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetReport report;
  std::vector<Sample> samples =
      load_dataset(data_file("bad_sharegpt.jsonl"), &gpt2, listing(), &report);
  EXPECT_EQ(samples.size(), 1u);
  const std::string f = data_file("bad_sharegpt.jsonl").string();
  EXPECT_EQ(
      report.problems,
      (std::vector<std::string>{
          f + ":2: field \"conversations[1].from\": unknown role \"narrator\"; expected system, "
              "human/user, gpt/assistant, tool/observation or function_call",
          f + ":3: field \"conversations\": no assistant turn to train on",
          f + ":4: field \"conversations[1].value\": empty response",
          f + ":5: field \"conversations\": expected a list, found string",
          f + ":6: field \"conversations[0].value\": expected a string, found array",
      }));
}

TEST(Dataset, AutoDetectsEveryFormat) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"alpaca.jsonl", "alpaca"},
      {"metamath.json", "query_response"},
      {"gsm8k_train_head.jsonl", "query_response"},
      {"prompt_completion.jsonl", "query_response"},
      {"sharegpt.jsonl", "sharegpt"},
      {"messages.jsonl", "sharegpt"},
      {"text.jsonl", "text"},
      {"paragraphs.txt", "text"},
      {"tokens.jsonl", "tokens"}};
  for (const auto& [file, format] : cases) {
    DatasetReport report;
    load_dataset(data_file(file), &gpt2, {}, &report);
    EXPECT_EQ(report.format, format) << file;
  }
  // The first row decides, even after bad rows.
  TempDir dir;
  fs::path file = dir.write("late.jsonl", "not json\n\n{\"text\": \"hello\"}\n{\"text\": \"x\"}\n");
  DatasetReport report;
  EXPECT_EQ(load_dataset(file, &gpt2, {}, &report).size(), 2u);
  EXPECT_EQ(report.format, "text");
  EXPECT_EQ(report.skipped, 1);
}

TEST(Dataset, UndetectableFormatNamesTheFields) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  std::string error =
      error_of([&] { load_dataset(data_file("unknown_fields.jsonl"), &gpt2, {}, nullptr); });
  EXPECT_TRUE(error.starts_with(data_file("unknown_fields.jsonl").string() +
                                ":1: cannot tell the dataset format from the fields [foo, bar]"))
      << error;
  // A null value counts as absent, and is named: the usual cause.
  TempDir dir;
  const fs::path nulls = dir.write("nulls.jsonl", "{\"question\": null, \"answer\": \"#### 5\"}\n");
  error = error_of([&] { load_dataset(nulls, &gpt2, {}, nullptr); });
  EXPECT_NE(error.find("from the fields [question (null), answer]"), std::string::npos) << error;
  EXPECT_NE(error.find("a field whose value is null counts as absent"), std::string::npos) << error;
  // A later row's null field is skipped naming it null, not missing.
  const fs::path later = dir.write(
      "later.jsonl",
      "{\"question\": \"1+1?\", \"answer\": \"2\"}\n{\"question\": null, \"answer\": \"3\"}\n");
  DatasetReport report;
  load_dataset(later, &gpt2, {}, &report);
  ASSERT_EQ(report.skipped, 1);
  EXPECT_NE(report.problems.at(0).find("null (expected a string)"), std::string::npos)
      << report.problems.at(0);
}

TEST(Dataset, NoUsableSamplesIsAnError) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  const std::string f = data_file("all_bad.jsonl").string();
  std::string error =
      error_of([&] { load_dataset(data_file("all_bad.jsonl"), &gpt2, {}, nullptr); });
  EXPECT_EQ(error, f + ": no usable samples (2 rows, 2 skipped; first problem: " + f +
                       ":1: field \"answer\": empty response)");
  TempDir dir;
  for (const char* contents : {"", "\n  \n", "[]", "[\n]\n"}) {
    fs::path file = dir.write("empty.json", contents);
    std::string message = error_of([&] { load_dataset(file, &gpt2, {}, nullptr); });
    EXPECT_NE(message.find("no usable samples: the file has no rows"), std::string::npos)
        << message;
  }
  // A format that fits no row.
  DatasetOptions options;
  options.format = "alpaca";
  error =
      error_of([&] { load_dataset(data_file("gsm8k_train_head.jsonl"), &gpt2, options, nullptr); });
  EXPECT_NE(error.find(":1: field \"instruction\": missing"), std::string::npos) << error;
}

TEST(Dataset, ReportsOnlyTheFirstProblemsButCountsAll) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  std::string contents = "{\"text\": \"good\"}\n";
  for (int i = 0; i < 30; ++i) contents += "{\"text\": 1}\n";
  TempDir dir;
  fs::path file = dir.write("many.jsonl", contents);
  DatasetReport report;
  load_dataset(file, &gpt2, listing(), &report);
  EXPECT_EQ(report.skipped, 30);
  ASSERT_EQ(report.problems.size(), kMaxReportedProblems);
  EXPECT_EQ(report.problems.back(),
            file.string() + ":21: field \"text\": expected a string, found number");
}

// One good row among 30 bad ones (the wrong file, rows in another format)
// trained on that row alone and exited 0, the 30 named only as skipped.
// More bad rows than good is refused, naming the file, the counts and the
// first problem; as many bad as good still loads.
TEST(Dataset, AFileOfMoreBadRowsThanGoodIsRefused) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  TempDir dir;
  const fs::path mostly_bad =
      dir.write("mostly_bad.jsonl", "{\"text\": \"good\"}\n{\"text\": 1}\ngarbage\n");
  const std::string error = error_of([&] { load_dataset(mostly_bad, &gpt2, {}, nullptr); });
  EXPECT_TRUE(error.starts_with(
      mostly_bad.string() + ": 2 of 3 rows are bad, more than the usable ones (1); the first: " +
      mostly_bad.string() + ":2: field \"text\": expected a string, found number. "))
      << error;
  EXPECT_NE(error.find("format than text (data.format)"), std::string::npos) << error;
  const fs::path half = dir.write("half.jsonl", "{\"text\": \"good\"}\n{\"text\": 1}\n");
  DatasetReport report;
  EXPECT_EQ(load_dataset(half, &gpt2, {}, &report).size(), 1u);
  EXPECT_EQ(report.skipped, 1);
}

TEST(Dataset, ByteOrderMarkCrlfAndJsonEscapes) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  TempDir dir;
  fs::path file = dir.write(
      "bom.jsonl", "\xEF\xBB\xBF{\"text\": \"caf\\u00e9\"}\r\n{\"text\": \"\xE2\x82\xAC 5\"}\r\n");
  std::vector<Sample> samples = load_dataset(file, &gpt2, {}, nullptr);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(gpt2.decode(std::vector<uint32_t>(samples[0].ids.begin(), samples[0].ids.end())),
            "caf\xC3\xA9<|endoftext|>");
  EXPECT_EQ(gpt2.decode(std::vector<uint32_t>(samples[1].ids.begin(), samples[1].ids.end())),
            "\xE2\x82\xAC 5<|endoftext|>");
  fs::path array = dir.write("bom.json", "\xEF\xBB\xBF [{\"text\": \"a\"}, {\"text\": \"b\"}]");
  EXPECT_EQ(load_dataset(array, &gpt2, {}, nullptr).size(), 2u);
  // A lone surrogate escape is not text.
  fs::path surrogate =
      dir.write("surrogate.jsonl", "{\"text\": \"\\ud800\"}\n{\"text\": \"ok\"}\n");
  DatasetReport report;
  load_dataset(surrogate, &gpt2, {}, &report);
  EXPECT_EQ(report.skipped, 1);
}

TEST(Dataset, InvalidUtf8InATextFile) {
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  TempDir dir;
  fs::path file = dir.write("bad.txt", "good\n\nbad \xC0\xAF here\n\nalso good\n");
  DatasetReport report;
  EXPECT_EQ(load_dataset(file, &gpt2, {}, &report).size(), 2u);
  EXPECT_EQ(report.problems,
            std::vector<std::string>{file.string() + ":3: invalid UTF-8 (byte 0xC0 at column 5)"});
}

TEST(Dataset, OptionErrors) {
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  DatasetOptions options = qwen_options();
  options.format = "csv";
  EXPECT_THROW(load_dataset(data_file("alpaca.jsonl"), &qwen, options, nullptr), Error);
  options = qwen_options();
  options.template_name = "llama3";  // Qwen3 has no <|start_header_id|>
  std::string error =
      error_of([&] { load_dataset(data_file("alpaca.jsonl"), &qwen, options, nullptr); });
  EXPECT_NE(error.find("<|begin_of_text|>"), std::string::npos) << error;
  error = error_of([&] { load_dataset(data_file("alpaca.jsonl"), nullptr, {}, nullptr); });
  EXPECT_NE(error.find("the alpaca format needs a tokenizer"), std::string::npos) << error;
  EXPECT_THROW(load_dataset(data_file("missing.jsonl"), &qwen, {}, nullptr), Error);
  // Names are checked even where they would not be used.
  options = qwen_options();
  options.format = "csv";
  error = error_of([&] { load_dataset(data_file("paragraphs.txt"), &qwen, options, nullptr); });
  EXPECT_NE(error.find("unknown dataset format \"csv\""), std::string::npos) << error;
  options = qwen_options();
  options.template_name = "vicuna";
  error = error_of([&] { load_dataset(data_file("text.jsonl"), &qwen, options, nullptr); });
  EXPECT_NE(error.find("unknown chat template \"vicuna\""), std::string::npos) << error;
}

// LLaMA-Factory's alpaca "history", [[instruction, response], ...], is the
// conversation before the row's own turn; it was dropped, the model trained
// on the last turn without the ones it answers. Its responses are trained as
// a sharegpt row's earlier answers are (every assistant turn; LLaMA-Factory's
// default), under every template, plain too.
TEST(Dataset, AlpacaHistoryIsTheEarlierTurns) {
  TempDir dir;
  const fs::path file = dir.write(
      "history.jsonl",
      "{\"system\": \"Be brief.\", \"instruction\": \"Second?\", \"input\": \"x\", \"output\": "
      "\"Two.\", \"history\": [[\"First?\", \"One.\"], [\"Again?\", \"Yes.\"]]}\n"
      "{\"instruction\": \"Hi\", \"output\": \"Hello\", \"history\": null}\n"
      "{\"instruction\": \"Hi\", \"output\": \"Hello\", \"history\": {\"First?\": \"One.\"}}\n"
      "{\"instruction\": \"Hi\", \"output\": \"Hello\", \"history\": [\"First? One.\"]}\n"
      "{\"instruction\": \"Hi\", \"output\": \"Hello\", \"history\": [[\"First?\", \"One.\", "
      "\"Two.\"]]}\n"
      "{\"instruction\": \"Hi\", \"output\": \"Hello\", \"history\": [[null, \"One.\"]]}\n"
      "{\"instruction\": \"Hi\", \"output\": \"Hello\", \"history\": [[\"First?\", \" \"]]}\n");
  const Tokenizer& qwen = reference_tokenizer("qwen3");
  DatasetOptions options = qwen_options();
  options.accept_mostly_bad = true;
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(file, &qwen, options, &report);
  EXPECT_EQ(report.format, "alpaca");
  ASSERT_EQ(samples.size(), 2u);
  Expected first(qwen);
  first.chatml(kQwenSystem, "Be brief.", false)
      .chatml(kQwenUser, "First?", false)
      .chatml(kQwenAssistant, "One.", true)
      .chatml(kQwenUser, "Again?", false)
      .chatml(kQwenAssistant, "Yes.", true)
      .chatml(kQwenUser, "Second?\nx", false)
      .qwen3_final_answer("Two.");
  expect_sample(samples[0], first.sample, "row 1");
  Expected second(qwen);  // null: no history
  second.chatml(kQwenUser, "Hi", false).qwen3_final_answer("Hello");
  expect_sample(samples[1], second.sample, "row 2");
  const std::string f = file.string();
  EXPECT_EQ(report.problems,
            (std::vector<std::string>{
                f + ":3: field \"history\": expected a list of [instruction, response] pairs, "
                    "found object",
                f + ":4: field \"history[0]\": expected a pair [instruction, response], found "
                    "\"First? One.\"",
                f + ":5: field \"history[0]\": expected a pair [instruction, response], found "
                    "[\"First?\",\"One.\",\"Two.\"]",
                f + ":6: field \"history[0][0]\": expected a string, found null",
                f + ":7: field \"history[0][1]\": empty response",
            }));

  // GPT-2 has no chat template: the plain layout writes the turns as it
  // writes a conversation, each answer trained with its EOS.
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetOptions plain;
  plain.accept_mostly_bad = true;
  samples = load_dataset(file, &gpt2, plain, &report);
  EXPECT_EQ(report.template_name, "plain");
  ASSERT_EQ(samples.size(), 2u);
  Expected e(gpt2);
  e.masked("Be brief.\nFirst?\n")
      .trained("One.")
      .trained(kGpt2Eos)
      .masked("Again?\n")
      .trained("Yes.")
      .trained(kGpt2Eos)
      .masked("Second?\nx\n")
      .trained("Two.")
      .trained(kGpt2Eos);
  expect_sample(samples[0], e.sample, "row 1, plain");
}

// The format comes from the first row with fields. An empty object first
// (an export's placeholder) refused the whole file ("cannot tell the
// dataset format from the fields []"); it is a bad row of the format the
// next rows have, as a later {} is. Blank lines are no rows.
TEST(Dataset, AnEmptyFirstRowIsABadRow) {
  TempDir dir;
  const fs::path file = dir.write("empty_first.jsonl",
                                  " \t\n"
                                  "{}\n"
                                  "{\"instruction\": \"Say hi.\", \"output\": \"Hi!\"}\n"
                                  "{}\n"
                                  "{\"instruction\": \"Say bye.\", \"output\": \"Bye!\"}\n"
                                  "{\"instruction\": \"Say yes.\", \"output\": \"Yes!\"}\n");
  const Tokenizer& gpt2 = reference_tokenizer("gpt2");
  DatasetReport report;
  std::vector<Sample> samples = load_dataset(file, &gpt2, {}, &report);
  EXPECT_EQ(report.format, "alpaca");
  EXPECT_EQ(report.rows, 5);
  EXPECT_EQ(report.skipped, 2);
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].line, 3);
  Expected e(gpt2);
  e.masked("Say hi.\n").trained("Hi!").trained(kGpt2Eos);
  expect_sample(samples[0], e.sample, "line 3");
  const std::string f = file.string();
  EXPECT_EQ(report.problems, (std::vector<std::string>{f + ":2: field \"instruction\": missing",
                                                       f + ":4: field \"instruction\": missing"}));
  EXPECT_EQ(detect_format(file, {}), "alpaca");

  // strict: the first bad row, the empty object, is the error.
  DatasetOptions strict;
  strict.strict = true;
  EXPECT_EQ(error_of([&] { load_dataset(file, &gpt2, strict, nullptr); }),
            f + ":2: field \"instruction\": missing");

  const fs::path only_empty = dir.write("only_empty.jsonl", "{}\n\n{}\n");
  const std::string g = only_empty.string();
  EXPECT_EQ(error_of([&] { load_dataset(only_empty, &gpt2, {}, nullptr); }),
            g + ": no usable samples (2 rows, 2 skipped; first problem: " + g +
                ":1: an empty object, and no row has a field to tell the format from)");
  EXPECT_NE(error_of([&] {
              detect_format(only_empty, {});
            }).find("no row is a JSON object with fields, so the dataset format cannot be told"),
            std::string::npos);
}

}  // namespace
}  // namespace lt::data
