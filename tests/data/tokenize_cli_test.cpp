// `lazytrain tokenize` end to end: stdin byte for byte, the output formats,
// and decoding back. Skipped when the program has not been built yet.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;

struct RunResult {
  int status;
  std::string out;
};

class TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    program_ = fs::path(LT_BINARY_DIR) / "lazytrain";
    if (!fs::exists(program_)) GTEST_SKIP() << program_ << " is not built";
    input_ = fs::temp_directory_path() / ("lazytrain_tokenize_cli_" + std::to_string(getpid()));
  }
  void TearDown() override { fs::remove(input_); }

  // Runs `lazytrain tokenize ARGS` with `input` on stdin.
  RunResult run(const std::string& args, const std::string& input) {
    std::ofstream(input_, std::ios::binary) << input;
    std::string command =
        program_.string() + " tokenize " + args + " < " + input_.string() + " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    std::string out;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
    return {pclose(pipe), out};
  }

  std::string qwen3() const {
    return "--tokenizer " + (testing::fixtures_dir() / "qwen3").string();
  }

  fs::path program_;
  fs::path input_;
};

TEST_F(TokenizeCli, EncodesAllOfStdinIncludingTheTrailingNewline) {
  std::string text = "Hello world!\n";
  const Tokenizer& tokenizer = testing::reference_tokenizer("qwen3");
  std::string expected;
  for (uint32_t id : tokenizer.encode(text))
    expected += (expected.empty() ? "" : " ") + std::to_string(id);
  RunResult result = run(qwen3(), text);
  EXPECT_EQ(result.status, 0);
  EXPECT_EQ(result.out, expected + "\n");
  // HF tokenizers: "Hello" 9707, " world" 1879, "!\n" 4894 (without the newline, "!" is 0).
  EXPECT_EQ(result.out, "9707 1879 4894\n");
}

TEST_F(TokenizeCli, PrintsJsonAndDecodesItBackExactly) {
  std::string text = "<|im_start|>user\n  caf\u00e9 \U0001F600\r\n\t";
  RunResult encoded = run(qwen3() + " --json", text);
  ASSERT_EQ(encoded.status, 0) << encoded.out;
  EXPECT_EQ(encoded.out.rfind("{\"ids\": [151644, ", 0), 0u) << encoded.out;
  RunResult decoded = run(qwen3() + " --decode", encoded.out);
  EXPECT_EQ(decoded.status, 0);
  EXPECT_EQ(decoded.out, text);
}

// --json goes with --decode too (the README's `[--decode] [--json]`): the
// text as one JSON object, where the flag was once ignored and the bare
// text printed.
TEST_F(TokenizeCli, DecodesToJsonWithJson) {
  // HF tokenizers: 9707 "Hello", 1879 " world", 4894 "!\n".
  RunResult decoded = run(qwen3() + " --decode --json", "[9707, 1879, 4894]");
  EXPECT_EQ(decoded.status, 0) << decoded.out;
  EXPECT_EQ(decoded.out, "{\"text\":\"Hello world!\\n\"}\n");
}

// --data reads no ids from stdin: --decode beside it is refused, naming
// both, rather than ignored.
TEST_F(TokenizeCli, RefusesDecodeWithData) {
  const fs::path rows = testing::fixtures_dir() / "datasets" / "messages.jsonl";
  RunResult both = run(qwen3() + " --decode --data " + rows.string(), "9707");
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.out.find("--decode"), std::string::npos) << both.out;
  EXPECT_NE(both.out.find("--data"), std::string::npos) << both.out;
  EXPECT_EQ(both.out.find("Hello"), std::string::npos) << both.out;
}

TEST_F(TokenizeCli, DecodesWhitespaceSeparatedIdsFromTheGpt2Pair) {
  std::string gpt2 = "--tokenizer " + (testing::fixtures_dir() / "gpt2").string();
  RunResult decoded = run(gpt2 + " --decode", "15496 995 0 220 50256\n");
  EXPECT_EQ(decoded.status, 0);
  EXPECT_EQ(decoded.out, "Hello world! <|endoftext|>");
}

TEST_F(TokenizeCli, BadInputIsAnErrorNotACrash) {
  RunResult unknown = run(qwen3() + " --decode", "{\"ids\": [1, 999999]}");
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.out.find("999999"), std::string::npos) << unknown.out;
  RunResult not_ids = run(qwen3() + " --decode", "1 two 3");
  EXPECT_NE(not_ids.status, 0);
  EXPECT_NE(not_ids.out.find("\"two\""), std::string::npos) << not_ids.out;
  RunResult missing = run("--tokenizer /nonexistent/tokenizer.json", "x");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.out.find("/nonexistent/tokenizer.json"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace lt::data
