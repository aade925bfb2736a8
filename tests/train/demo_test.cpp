// The embedded demo (`lazytrain train` with no config): its addition task
// (assets/demo/addition, written by scripts/make_demo_data.py) is what the
// demo says it is, and a shortened run trains and reports as it should.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <regex>
#include <set>
#include <utility>

#include "data/math_answer.h"
#include "data/tokenizer.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

fs::path addition_dir() {
  return fs::path(LT_SOURCE_DIR) / "assets/demo/addition";
}

struct Problem {
  int a = 0, b = 0;
  std::string question, answer;
};

// Each row's two numbers, read back out of its question by a pattern of
// the sentence the script writes.
std::vector<Problem> read_problems(const fs::path& file) {
  static const std::regex sentence(
      "([A-Z][a-z]+) has ([0-9]+) ([a-z]+) and gets ([0-9]+) more\\. "
      "How many ([a-z]+) does ([A-Z][a-z]+) have now\\?");
  std::vector<Problem> problems;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const auto row = nlohmann::json::parse(line);
    Problem p{0, 0, row.at("question").get<std::string>(), row.at("answer").get<std::string>()};
    std::smatch m;
    EXPECT_TRUE(std::regex_match(p.question, m, sentence)) << p.question;
    if (m.empty()) continue;
    EXPECT_EQ(m[1], m[6]) << p.question;  // the same person
    EXPECT_EQ(m[3], m[5]) << p.question;  // the same things
    p.a = std::stoi(m[2]);
    p.b = std::stoi(m[4]);
    problems.push_back(p);
  }
  return problems;
}

// Every pair of two-digit numbers is a problem exactly once, the 200
// held-out pairs are not among the training rows, and every answer is the
// sum, written so that the math extraction reads it.
TEST(Demo, HeldOutProblemsAreUnseenAndEveryAnswerIsTheSum) {
  const auto train = read_problems(addition_dir() / "train.jsonl");
  const auto test = read_problems(addition_dir() / "test.jsonl");
  EXPECT_EQ(test.size(), 200u);
  EXPECT_EQ(train.size() + test.size(), 90u * 90u);
  std::set<std::pair<int, int>> seen;
  for (const auto* rows : {&train, &test}) {
    for (const Problem& p : *rows) {
      EXPECT_TRUE(p.a >= 10 && p.a <= 99 && p.b >= 10 && p.b <= 99) << p.question;
      EXPECT_TRUE(seen.insert({p.a, p.b}).second) << "twice: " << p.question;
      EXPECT_EQ(p.answer, "#### " + std::to_string(p.a + p.b)) << p.question;
      EXPECT_EQ(data::reference_answer(p.answer), std::to_string(p.a + p.b));
    }
  }
  EXPECT_EQ(seen.size(), 90u * 90u);
}

// One token per word and one per digit (worked by hand from the sentence),
// so every question is the same 22 tokens with the newline the plain
// template adds, and a digit is the same token wherever it stands.
TEST(Demo, TheTokenizerGivesAWordOrADigitPerToken) {
  const auto tokenizer = data::Tokenizer::load(addition_dir() / "tokenizer");
  const std::string text =
      "Kim has 12 shells and gets 64 more. How many shells does Kim have now?\n#### 76";
  std::vector<std::string> pieces;
  for (uint32_t id : tokenizer.encode(text)) pieces.push_back(tokenizer.decode(std::vector{id}));
  const std::vector<std::string> expected = {
      "Kim",   " has", " ",     "1",  "2",    " shells", " and",    " gets", " ",
      "6",     "4",    " more", ".",  " How", " many",   " shells", " does", " Kim",
      " have", " now", "?",     "\n", "####", " ",       "7",       "6"};
  EXPECT_EQ(pieces, expected);
  const auto first_seven = tokenizer.encode(" 73"), second_seven = tokenizer.encode(" 37");
  ASSERT_EQ(first_seven.size(), 3u);
  ASSERT_EQ(second_seven.size(), 3u);
  EXPECT_EQ(first_seven[1], second_seven[2]);
  const auto eos = tokenizer.token_to_id("<|endoftext|>");
  ASSERT_TRUE(eos.has_value());
  const auto model = nlohmann::json::parse(read_text(addition_dir() / "model/config.json"));
  EXPECT_EQ(model.at("eos_token_id").get<uint32_t>(), *eos);
  EXPECT_EQ(model.at("vocab_size").get<size_t>(), tokenizer.vocab_size());
  for (const Problem& p : read_problems(addition_dir() / "test.jsonl"))
    EXPECT_EQ(tokenizer.encode(p.question + "\n").size(), 22u) << p.question;
}

// The demo's held-out problems go with its data: pointing it at other data
// drops them unless the overrides keep them.
TEST(Demo, OtherDataDropsTheDemosEvaluation) {
  TempDir tmp("demo_other_data");
  const std::string mine = (tmp / "mine.jsonl").string(), held = (tmp / "held.jsonl").string();
  write_random_tokens(mine, 4, 97, 1);
  write_random_tokens(held, 4, 97, 2);
  const TrainConfig demo = load_train_config("", {});
  EXPECT_EQ(demo.data.eval_task, "math");
  EXPECT_GT(demo.train.eval_every, 0);
  EXPECT_NE(demo.data.eval_path.find("addition/test.jsonl"), std::string::npos);
  const TrainConfig defaults;
  for (const std::string& set : {"data.path=" + mine, std::string("data.format=tokens")}) {
    const TrainConfig c = load_train_config("", {set});
    EXPECT_EQ(c.data.eval_task, defaults.data.eval_task) << set;
    EXPECT_EQ(c.data.eval_path, defaults.data.eval_path) << set;
    EXPECT_EQ(c.data.eval_max_new_tokens, defaults.data.eval_max_new_tokens) << set;
    EXPECT_EQ(c.train.eval_every, defaults.train.eval_every) << set;
  }
  const TrainConfig kept =
      load_train_config("", {"data.path=" + mine, "data.eval_path=" + held, "train.eval_every=5"});
  EXPECT_EQ(kept.data.eval_path, held);
  EXPECT_EQ(kept.train.eval_every, 5);
  EXPECT_EQ(kept.data.eval_task, "");
  // Another model on the demo's data keeps them.
  EXPECT_EQ(load_train_config("", {"model.path=" + fixture("llama").string()}).data.eval_task,
            "math");
  // The demo's rows are query_response; the overrides' file is read as it is.
  EXPECT_EQ(demo.data.format, "query_response");
  EXPECT_EQ(load_train_config("", {"data.path=" + mine}).data.format, defaults.data.format);
  // data.sources in place of the demo's data.path (both set was refused).
  TrainConfig sources;
  ASSERT_NO_THROW(sources = load_train_config("", {"data.sources=[{path: " + mine + "}]"}));
  EXPECT_EQ(sources.data.path, "");
  ASSERT_EQ(sources.data.sources.size(), 1u);
  EXPECT_EQ(sources.data.sources[0].path, mine);
}

// Another model takes its own tokenizer and template and the defaults, not
// the settings the demo chose for its toy model (its tokenizer of 426 words,
// seq_len 28, a learning rate of 2e-3): the README's fine-tune shortcut.
TEST(Demo, AnotherModelTakesItsOwnTokenizerAndTheDefaults) {
  const TrainConfig demo = load_train_config("", {});
  const TrainConfig defaults;
  ASSERT_NE(demo.data.tokenizer, defaults.data.tokenizer);
  ASSERT_NE(demo.train.seq_len, defaults.train.seq_len);
  ASSERT_NE(demo.optim.lr, defaults.optim.lr);
  const std::string model = "model.path=" + fixture("qwen3").string();
  const TrainConfig c = load_train_config("", {model});
  EXPECT_EQ(c.data.tokenizer, "");  // the model folder's
  EXPECT_EQ(c.data.template_name, defaults.data.template_name);
  EXPECT_EQ(c.train.seq_len, defaults.train.seq_len);
  EXPECT_EQ(c.train.batch_size, defaults.train.batch_size);
  EXPECT_EQ(c.train.steps, defaults.train.steps);
  EXPECT_EQ(c.optim.lr, defaults.optim.lr);
  EXPECT_EQ(c.sched.name, defaults.sched.name);
  EXPECT_EQ(c.out.dir, fs::absolute(defaults.out.dir).string());  // stored absolute
  ASSERT_EQ(c.adjustments().size(), 1u);
  EXPECT_THAT(c.adjustments()[0], ::testing::HasSubstr("data.tokenizer, data.template, "
                                                       "train.seq_len"));
  // What the overrides set stays.
  const TrainConfig kept = load_train_config("", {model, "train.seq_len=48", "optim.lr=3e-5"});
  EXPECT_EQ(kept.train.seq_len, 48);
  EXPECT_EQ(kept.optim.lr, 3e-5);
  EXPECT_EQ(kept.data.tokenizer, "");
  // Without a model override the demo is the demo, and says nothing.
  EXPECT_TRUE(load_train_config("", {"train.steps=5"}).adjustments().empty());
  EXPECT_EQ(load_train_config("", {"train.steps=5"}).data.tokenizer, demo.data.tokenizer);
}

// A shortened demo: the loss of the model trained from scratch falls
// visibly within a few steps, the held-out problems are scored before the
// first step and after the last, and the run ends with that line and
// three held-out answers.
TEST(Demo, LossFallsAndTheRunEndsWithHeldOutAccuracyBeforeAndAfter) {
  TempDir tmp("demo");
  const fs::path out = tmp / "runs";
  const auto start = std::chrono::steady_clock::now();
  std::string output;
  const int code = run_program({"train", "--set", "train.steps=12", "--set", "train.eval_every=12",
                                "--set", "out.dir=" + out.string()},
                               tmp / "demo.log", &output, 300);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(code, 0) << output;
  RecordProperty("seconds", std::to_string(seconds));
  const auto metrics = read_metrics(out);
  const auto losses = field(metrics, "loss");
  ASSERT_EQ(losses.size(), 12u);
  // From scratch the first loss is about ln(vocab) = ln 426 = 6.05.
  EXPECT_NEAR(losses[0], std::log(426.0), 0.5);
  const double last3 = (losses[9] + losses[10] + losses[11]) / 3;
  EXPECT_LE(last3, losses[0] - 1.0) << "first " << losses[0] << ", mean of the last 3 " << last3;
  ASSERT_TRUE(metrics[11].contains("eval_accuracy"));
  EXPECT_NE(output.find("step 0 (before training): eval accuracy"), std::string::npos) << output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(output, m,
                                std::regex("held-out accuracy \\(exact match, 200 problems\\): "
                                           "([0-9.]+)% \\(([0-9]+)\\) before training -> "
                                           "([0-9.]+)% \\(([0-9]+)\\) after 12 steps")))
      << output;
  EXPECT_EQ(std::stoi(m[4]), std::lround(200 * metrics[11].at("eval_accuracy").get<double>()));
  EXPECT_NE(output.find("held-out problems, greedy answers at step 12:"), std::string::npos)
      << output;
  EXPECT_TRUE(fs::exists(out / "step-12" / "trainer_state.json"));
  // The saved config says what ran: train.dtype auto is resolved.
  const std::string saved = read_text(out / "config.yaml");
  EXPECT_EQ(saved.find("dtype: auto"), std::string::npos) << saved;
  EXPECT_TRUE(saved.find("dtype: f32") != std::string::npos ||
              saved.find("dtype: bf16") != std::string::npos)
      << saved;
  std::cout << "demo: 12 steps in " << seconds << " s, loss " << losses[0] << " -> " << last3
            << "\n";
}

}  // namespace
}  // namespace lt::train::testing
