// `lazytrain generate --prompt TEXT --tools FILE`: what goes wrong with the
// tools is said of --tools and its file. A built-in layout's refusal said
// "the row has tools" where no row was read, and a missing, unreadable or
// malformed file was named without the option that gave it.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "data/byte_level.h"
#include "support/byte_level_tokenizer.h"
#include "support/cli_run.h"
#include "support/fixture_tokenizers.h"
#include "train_helpers.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

using lt::testing::CliResult;

class GenerateTools : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "tok");
    // The printable ASCII characters as ids 0..94, <unk> 95, <|endoftext|>
    // 96: the llama fixture's 97 rows. No chat template of its own.
    nlohmann::json vocab = nlohmann::json::object();
    for (char c = 0x20; c < 0x7F; ++c) vocab[data::byte_level_encode(std::string(1, c))] = c - 0x20;
    vocab["<unk>"] = 95;
    std::ofstream(dir_ / "tok" / "tokenizer.json")
        << lt::testing::byte_level_tokenizer(vocab,
                                             {lt::testing::special_token(96, "<|endoftext|>")})
               .dump();
    std::ofstream(dir_ / "tools.json")
        << R"([{"type": "function", "function": {"name": "add", "parameters": {}}}])";
  }

  // `lazytrain generate ARGS --model <llama> --tokenizer <tok>`; stderr.
  std::string generate(const std::string& args, int* status) {
    const CliResult r = lt::testing::run_lazytrain(
        "generate --max-new-tokens 1 " + args + " --model " +
            lt::testing::llama_fixture().string() + " --tokenizer " + (dir_ / "tok").string(),
        dir_ / "stderr.txt");
    *status = r.status;
    return r.err;
  }

  testing::TempDir tmp_{"generate_tools"};  // removed when the test ends
  const fs::path dir_ = tmp_.path();
};

TEST_F(GenerateTools, ABuiltInLayoutsRefusalNamesTheToolsOption) {
  const std::string tools = (dir_ / "tools.json").string();
  int status = 0;
  std::string err = generate("--prompt hi --template plain --tools " + tools, &status);
  EXPECT_EQ(status, 1) << err;
  EXPECT_EQ(err, "lazytrain: error: generate: --tools " + tools +
                     " gives tools, which only the model's own chat template knows how to lay "
                     "out; use it (template auto: --template auto, or data.template: auto), not a "
                     "built-in layout\n");
  // auto, for a tokenizer with no template of its own: plain stands in.
  err = generate("--prompt hi --tools " + tools, &status);
  EXPECT_EQ(status, 1) << err;
  EXPECT_NE(err.find("lazytrain: error: generate: --tools " + tools +
                     " gives tools, which only the model's own chat template knows how to lay "
                     "out; the tokenizer has no chat template of its own"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("the row"), std::string::npos) << err;

  // A row of --data with "tools" is still the row's.
  std::ofstream(dir_ / "rows.jsonl")
      << nlohmann::json{{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                        {"tools", nlohmann::json::parse(
                                      R"([{"type": "function", "function": {"name": "add"}}])")}}
             .dump()
      << "\n";
  err = generate("--data " + (dir_ / "rows.jsonl").string() + " --template plain", &status);
  EXPECT_EQ(status, 1) << err;
  EXPECT_NE(err.find("the row has tools"), std::string::npos) << err;
  EXPECT_EQ(err.find("--tools"), std::string::npos) << err;
}

TEST_F(GenerateTools, AToolsFileThatCannotBeReadIsNamedWithTheOption) {
  int status = 0;
  const std::string gone = (dir_ / "gone.json").string();
  std::string err = generate("--prompt hi --tools " + gone, &status);
  EXPECT_EQ(status, 1) << err;
  EXPECT_EQ(err, "lazytrain: error: --tools " + gone + ": cannot read it: no such file\n");

  const std::string folder = (dir_ / "tok").string();
  err = generate("--prompt hi --tools " + folder, &status);
  EXPECT_EQ(status, 1) << err;
  EXPECT_NE(err.find("lazytrain: error: --tools " + folder + ": is a folder, not a regular file"),
            std::string::npos)
      << err;

  // Malformed JSON: the option, the file, and the line and column where it
  // breaks: the string "add" where a ':' belongs, on line 2 in columns 10
  // to 14 (JSON parsers name the last character they read).
  const fs::path bad = dir_ / "bad.json";
  std::ofstream(bad) << "[{\"type\": \"function\",\n  \"name\" \"add\"}]\n";
  err = generate("--prompt hi --tools " + bad.string(), &status);
  EXPECT_EQ(status, 1) << err;
  EXPECT_NE(err.find("lazytrain: error: --tools " + bad.string() + ": not valid JSON ("),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("line 2, column 14"), std::string::npos) << err;

  // A schema that is not an object names the field, after the option.
  std::ofstream(bad, std::ios::trunc) << R"({"tools": [1]})";
  err = generate("--prompt hi --tools " + bad.string(), &status);
  EXPECT_EQ(status, 1) << err;
  EXPECT_EQ(err, "lazytrain: error: --tools " + bad.string() +
                     ": field \"tools[0]\": expected an object (a JSON schema), found number\n");
}

}  // namespace
}  // namespace lt::train
