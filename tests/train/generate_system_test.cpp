// `lazytrain generate`: --system (a system turn before --prompt's user
// turn, laid out by the chat template as a row's "system" field is in
// training), the format and template in --json's last object, and the note
// when the model folder's generation_config.json asks for sampling that this
// greedy run does not do.
//
// The tokenizer, made here to fit the llama fixture's 97 ids: ' '..'|' as
// ids 0..92 (no merges), "\n" 93, <unk> 94, <|im_start|> 95, <|im_end|> 96,
// so that the chatml layout's prompt can be written by hand from this table.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/byte_level.h"
#include "io/hf_model.h"
#include "support/byte_level_tokenizer.h"
#include "support/cli_run.h"
#include "support/fixture_tokenizers.h"
#include "support/generate_rows.h"
#include "train/generation.h"
#include "train_helpers.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

using lt::testing::CliResult;

constexpr int32_t kNewline = 93, kUnk = 94, kImStart = 95, kImEnd = 96;
constexpr int32_t kFolderEos = 2;  // the fixture's generation_config.json

std::vector<int32_t> ids_of(const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(c == '\n' ? kNewline : c - 0x20);
  return ids;
}

// chatml: <|im_start|>role\ncontent<|im_end|>\n per turn, then
// <|im_start|>assistant\n.
std::vector<int32_t> chatml_prompt(const std::string& system, const std::string& user) {
  std::vector<int32_t> ids;
  auto turn = [&](const std::string& role, const std::string& content) {
    ids.push_back(kImStart);
    for (int32_t id : ids_of(role + "\n" + content)) ids.push_back(id);
    ids.push_back(kImEnd);
    ids.push_back(kNewline);
  };
  turn("system", system);
  turn("user", user);
  ids.push_back(kImStart);
  for (int32_t id : ids_of("assistant\n")) ids.push_back(id);
  return ids;
}

class GenerateSystem : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "tok");
    nlohmann::json vocab = nlohmann::json::object();
    for (char c = 0x20; c < 0x7D; ++c) vocab[data::byte_level_encode(std::string(1, c))] = c - 0x20;
    vocab[data::byte_level_encode("\n")] = kNewline;
    vocab["<unk>"] = kUnk;
    std::ofstream(dir_ / "tok" / "tokenizer.json")
        << lt::testing::byte_level_tokenizer(vocab,
                                             {lt::testing::special_token(kImStart, "<|im_start|>"),
                                              lt::testing::special_token(kImEnd, "<|im_end|>")})
               .dump();
  }

  // `lazytrain generate ARGS --model MODEL --tokenizer <tok>`.
  CliResult generate(const std::string& args,
                     const fs::path& model = lt::testing::llama_fixture()) {
    return lt::testing::run_lazytrain("generate " + args + " --model " + model.string() +
                                          " --tokenizer " + (dir_ / "tok").string(),
                                      dir_ / "stderr.txt");
  }

  // The library's greedy tokens for `prompt`, ending where the command ends
  // a chatml answer: the folder's EOS and <|im_end|>.
  static std::vector<int32_t> library(const std::vector<int32_t>& prompt, int64_t max_new_tokens) {
    static const models::CausalLM model =
        io::load_hf_model(lt::testing::llama_fixture(), DType::F32);
    GenerationOptions options;
    options.max_new_tokens = max_new_tokens;
    options.eos_ids = {kFolderEos, kImEnd};
    return train::generate(model, {prompt}, options).at(0).tokens;
  }

  testing::TempDir tmp_{"generate_system"};  // removed when the test ends
  const fs::path dir_ = tmp_.path();
};

TEST_F(GenerateSystem, ASystemMessageIsATurnBeforeThePrompt) {
  const CliResult r =
      generate("--template chatml --prompt 'ab 1' --system 'Be x.' --max-new-tokens 12 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<int32_t> want = library(chatml_prompt("Be x.", "ab 1"), 12);
  EXPECT_EQ(lt::testing::generated_rows(r.out).at(0).at("output_ids").get<std::vector<int32_t>>(),
            want);
  // The prompt decides the answer here: without the system turn it differs.
  std::vector<int32_t> user_only = {kImStart};
  for (int32_t id : ids_of("user\nab 1")) user_only.push_back(id);
  for (int32_t id : {kImEnd, kNewline, kImStart}) user_only.push_back(id);
  for (int32_t id : ids_of("assistant\n")) user_only.push_back(id);
  EXPECT_NE(library(user_only, 12), want);
}

TEST_F(GenerateSystem, SystemWithDataIsRefused) {
  std::ofstream(dir_ / "q.jsonl") << "{\"question\": \"hi\"}\n";
  const CliResult r = generate("--system 'Be x.' --data " + (dir_ / "q.jsonl").string());
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(r.err,
            "lazytrain: error: generate: --system goes with --prompt; --data rows carry their "
            "own system prompt (a \"system\" field, or a system turn): put it in the rows\n");
}

// As eval --json's object: "format", and "template" when the prompts took one.
TEST_F(GenerateSystem, JsonEndsWithTheFormatAndTemplate) {
  std::ofstream(dir_ / "q.jsonl") << "{\"question\": \"hi\"}\n{\"question\": \"yo\"}\n";
  std::ofstream(dir_ / "ids.jsonl") << "{\"input_ids\": [5, 9]}\n";
  auto last = [](const std::string& out) {
    std::istringstream lines(out);
    std::string line, final;
    while (std::getline(lines, line)) final = line;
    return nlohmann::json::parse(final);
  };
  struct Case {
    std::string args, format, template_name;
  };
  for (const Case& c : {Case{"--prompt hi", "prompt", "chatml"},
                        Case{"--data " + (dir_ / "q.jsonl").string(), "query_response", "chatml"},
                        Case{"--data " + (dir_ / "ids.jsonl").string(), "tokens", ""}}) {
    const CliResult r = generate(c.args + " --template chatml --max-new-tokens 2 --json");
    ASSERT_EQ(r.status, 0) << c.args << "\n" << r.err;
    const nlohmann::json j = last(r.out);
    EXPECT_FALSE(j.contains("row")) << r.out;
    EXPECT_EQ(j.at("format"), c.format) << r.out;
    if (c.template_name.empty()) {
      EXPECT_FALSE(j.contains("template")) << r.out;
    } else {
      EXPECT_EQ(j.value("template", ""), c.template_name) << r.out;
    }
  }
}

TEST_F(GenerateSystem, AFolderThatAsksForSamplingIsToldThisRunIsGreedy) {
  const fs::path model = dir_ / "model";
  fs::copy(lt::testing::llama_fixture(), model);
  std::ofstream(model / "generation_config.json")
      << R"({"eos_token_id": 2, "do_sample": true, "temperature": 0.6, "top_p": 0.95,)"
      << R"( "top_k": 20})";
  const std::string note =
      "generate: note: " + model.string() +
      "'s generation_config.json asks for sampling (do_sample true, temperature 0.6, top_p "
      "0.95, top_k 20); this run is greedy, as generate is without --temperature: give "
      "--temperature 0.6 --top-p 0.95 --top-k 20 to sample as it asks\n";
  const std::string args = "--template chatml --prompt hi --max-new-tokens 2";
  CliResult r = generate(args, model);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(note), std::string::npos) << r.err;
  r = generate(args + " --json", model);  // on stderr, under --json too
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(note), std::string::npos) << r.err;

  // A sampling option given: the run is as asked, nothing said.
  r = generate(args + " --temperature 0.7", model);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("asks for sampling"), std::string::npos) << r.err;

  // do_sample alone: transformers' temperature 1.0.
  std::ofstream(model / "generation_config.json") << R"({"eos_token_id": 2, "do_sample": true})";
  r = generate(args, model);
  EXPECT_NE(r.err.find("generate: note: " + model.string() +
                       "'s generation_config.json asks for sampling (do_sample true); this run is "
                       "greedy, as generate is without --temperature: give --temperature 1.0 to "
                       "sample as it asks\n"),
            std::string::npos)
      << r.err;

  // do_sample false (the fixture's own: absent): nothing said.
  std::ofstream(model / "generation_config.json")
      << R"({"eos_token_id": 2, "do_sample": false, "temperature": 0.6})";
  r = generate(args, model);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("asks for sampling"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace lt::train
