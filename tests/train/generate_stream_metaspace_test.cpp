// `generate --prompt` streams a SentencePiece-style (Metaspace) answer as
// Hugging Face's TextStreamer prints it: the text of tokenizer.decode() of
// the new tokens, so the first token's leading space is dropped (the Strip
// decoder) and no character is lost or repeated. The reference is the
// vocabulary below, read by hand: every generated piece is "▁" and one
// character, i.e. a space and that character.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "support/generate_rows.h"

namespace lt::train {
namespace {

namespace fs = std::filesystem;

const fs::path kLlama = fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/llama";
// The fixture model has 97 ids: 0 is "▁", 1..94 are "▁" + the character
// 0x20 + id ('!' .. '~'), 95 <unk>, 96 </s>.
constexpr int kUnk = 95, kEos = 96;
constexpr int kFolderEos = 2;  // the fixture's generation_config.json

std::string piece_text(int id) {
  return id == 0 ? " " : std::string(" ") + static_cast<char>(0x20 + id);
}

class MetaspaceStream : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lt_generate_metaspace_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "tok");
    nlohmann::json vocab = nlohmann::json::object();
    vocab["\u2581"] = 0;
    for (int id = 1; id <= 94; ++id)
      vocab["\u2581" + std::string(1, static_cast<char>(0x20 + id))] = id;
    vocab["<unk>"] = kUnk;
    vocab["</s>"] = kEos;
    // Llama 2's layout (tokenizers' conversion of its tokenizer.model).
    const nlohmann::json tokenizer = {
        {"version", "1.0"},
        {"added_tokens",
         {{{"id", kUnk}, {"content", "<unk>"}, {"special", true}, {"normalized", false}},
          {{"id", kEos}, {"content", "</s>"}, {"special", true}, {"normalized", false}}}},
        {"normalizer",
         {{"type", "Sequence"},
          {"normalizers",
           {{{"type", "Prepend"}, {"prepend", "\u2581"}},
            {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
        {"pre_tokenizer", nullptr},
        {"decoder",
         {{"type", "Sequence"},
          {"decoders",
           {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
            {{"type", "ByteFallback"}},
            {{"type", "Fuse"}},
            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
        {"model",
         {{"type", "BPE"},
          {"vocab", vocab},
          {"merges", nlohmann::json::array()},
          {"unk_token", "<unk>"},
          {"fuse_unk", true},
          {"byte_fallback", false}}}};
    std::ofstream(dir_ / "tok" / "tokenizer.json") << tokenizer.dump();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // stdout of `lazytrain generate ARGS --model <llama> --tokenizer <tok>`.
  std::string run(const std::string& args) {
    const std::string cmd = std::string(LT_BINARY_DIR) + "/lazytrain generate " + args +
                            " --model " + kLlama.string() + " --tokenizer " +
                            (dir_ / "tok").string() + " 2>" + (dir_ / "stderr.txt").string();
    FILE* pipe = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    const int raw = pclose(pipe);
    std::ifstream err(dir_ / "stderr.txt");
    std::stringstream s;
    s << err.rdbuf();
    EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << cmd << "\n" << s.str();
    return out;
  }

  fs::path dir_;
};

TEST_F(MetaspaceStream, TheStreamIsTheDecodedTextWithoutTheLeadingSpace) {
  for (const char* prompt : {"hi", "a b", "What is 2 + 2?"}) {
    SCOPED_TRACE(prompt);
    const std::string common = std::string("--prompt '") + prompt + "' --max-new-tokens 10";
    const nlohmann::json row = lt::testing::generated_rows(run(common + " --json")).at(0);
    const std::vector<int> ids = row.at("output_ids").get<std::vector<int>>();
    ASSERT_FALSE(ids.empty());
    // The leading-space case: the first new token is a "▁x" piece.
    ASSERT_NE(ids.front(), kFolderEos);
    ASSERT_LT(ids.front(), kUnk);
    std::string want;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (row.at("finish") == "eos" && i + 1 == ids.size()) break;
      if (ids[i] < kUnk) want += piece_text(ids[i]);
    }
    want.erase(0, 1);  // Strip: the text's first space
    EXPECT_EQ(row.at("text").get<std::string>(), want);
    EXPECT_EQ(run(common), want + "\n");
  }
}

}  // namespace
}  // namespace lt::train
