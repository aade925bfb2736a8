// A checkpoint's tokenizer loads in transformers (README): GPT-2's original
// encoder.json + vocab.bpe, which transformers' GPT2Tokenizer cannot read,
// get vocab.json + merges.txt beside them, and a tokenizer without a
// tokenizer_config.json gets one naming its class and special tokens.
// Checkpoints held only encoder.json and vocab.bpe (AutoTokenizer: "Can't
// load tokenizer"), or a bare tokenizer.json (transformers knew no EOS, so
// generate never stopped). The expectations are transformers' formats:
// vocab.json is the token -> id object GPT2Tokenizer json.load()s (GPT-2's
// is the same object as OpenAI's encoder.json), merges.txt the lines it
// reads as `f.read().split("\n")[1:-1]` (the first line, "#version: 0.2",
// and the empty one after the last newline dropped), and GPT-2's published
// ids ("Hello world" is 15496 995, <|endoftext|> 50256).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "io/hf_model.h"
#include "support/byte_level_tokenizer.h"
#include "train/checkpoint.h"
#include "train/tokenizer_files_for_transformers.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

using nlohmann::json;

const fs::path kGpt2 = fs::path(LT_SOURCE_DIR) / "tests/data/fixtures/gpt2";
const fs::path kAddition = fs::path(LT_SOURCE_DIR) / "assets/demo/addition/tokenizer";

// Text with spaces, digits, punctuation, newlines and non-ASCII.
const std::string kSample = "Hello world! 12+34=46.\n\n  Naïve café, <|endoftext|> done";

json read_json(const fs::path& file) {
  return json::parse(read_text(file));
}

// What Python's str.split("\n") gives.
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t newline; (newline = text.find('\n', start)) != std::string::npos; start = newline + 1)
    lines.push_back(text.substr(start, newline - start));
  lines.push_back(text.substr(start));
  return lines;
}

// The merges GPT2Tokenizer reads from `file`: split("\n")[1:-1].
std::vector<std::string> merges_as_transformers_reads(const fs::path& file) {
  std::vector<std::string> lines = split_lines(read_text(file));
  if (lines.size() < 2) return {};
  return std::vector<std::string>(lines.begin() + 1, lines.end() - 1);
}

// Copies `names` from `from` into a new folder `to`.
fs::path copy_files(const fs::path& from, const std::vector<std::string>& names,
                    const fs::path& to) {
  fs::create_directories(to);
  for (const std::string& name : names) fs::copy_file(from / name, to / name);
  return to;
}

std::vector<uint32_t> ids_of(const fs::path& tokenizer, const std::string& text) {
  return data::Tokenizer::load(tokenizer).encode(text);
}

TEST(TokenizerFilesForTransformers, Gpt2sFilesGetVocabJsonMergesTxtAndAConfig) {
  const TempDir tmp("tokenizer_files_gpt2");
  const fs::path folder = copy_files(kGpt2, {"encoder.json", "vocab.bpe"}, tmp / "tok");
  EXPECT_EQ(write_tokenizer_files_for_transformers(folder),
            (std::vector<std::string>{"vocab.json", "merges.txt", "tokenizer_config.json"}));

  const json vocab = read_json(folder / "vocab.json");
  EXPECT_EQ(vocab, read_json(kGpt2 / "encoder.json"));
  EXPECT_EQ(vocab.size(), 50257u);
  EXPECT_EQ(vocab.at("<|endoftext|>"), 50256);
  EXPECT_EQ(vocab.at("Hello"), 15496);

  const std::string merges = read_text(folder / "merges.txt");
  EXPECT_EQ(split_lines(merges).front(), "#version: 0.2");
  const std::vector<std::string> lines = merges_as_transformers_reads(folder / "merges.txt");
  EXPECT_EQ(lines, merges_as_transformers_reads(kGpt2 / "vocab.bpe"));
  ASSERT_EQ(lines.size(), 50000u);  // GPT-2's 50000 merges
  EXPECT_EQ(lines.front(), "\u0120 t");
  EXPECT_EQ(lines.back(), "\u0120g azed");

  EXPECT_EQ(read_json(folder / "tokenizer_config.json"),
            json({{"tokenizer_class", "GPT2Tokenizer"},
                  {"bos_token", "<|endoftext|>"},
                  {"eos_token", "<|endoftext|>"},
                  {"unk_token", "<|endoftext|>"},
                  {"clean_up_tokenization_spaces", false}}));
  // Once there, nothing is written again.
  EXPECT_TRUE(write_tokenizer_files_for_transformers(folder).empty());
}

// The files transformers reads, alone, load in lazytrain (as GPT2Tokenizer's
// vocab.json + merges.txt) with the ids of the originals and of GPT-2.
TEST(TokenizerFilesForTransformers, TheWrittenFilesAloneGiveGpt2sIds) {
  const TempDir tmp("tokenizer_files_reload");
  const fs::path folder = copy_files(kGpt2, {"encoder.json", "vocab.bpe"}, tmp / "tok");
  write_tokenizer_files_for_transformers(folder);
  const fs::path alone =
      copy_files(folder, {"vocab.json", "merges.txt", "tokenizer_config.json"}, tmp / "alone");
  EXPECT_EQ(ids_of(alone, "Hello world"), (std::vector<uint32_t>{15496, 995}));
  EXPECT_EQ(ids_of(alone, "<|endoftext|>"), (std::vector<uint32_t>{50256}));
  EXPECT_EQ(ids_of(alone, kSample), ids_of(kGpt2, kSample));
}

// The demo's addition tokenizer: a tokenizer.json with <|endoftext|> (425)
// and no post-processor, no padding: the class and the EOS only.
TEST(TokenizerFilesForTransformers, ATokenizerJsonGetsTheClassAndTheTokensItHas) {
  const TempDir tmp("tokenizer_files_fast");
  const fs::path folder = copy_files(kAddition, {"tokenizer.json"}, tmp / "tok");
  EXPECT_EQ(write_tokenizer_files_for_transformers(folder),
            (std::vector<std::string>{"tokenizer_config.json"}));
  EXPECT_EQ(read_json(folder / "tokenizer_config.json"),
            json({{"tokenizer_class", "PreTrainedTokenizerFast"},
                  {"eos_token", "<|endoftext|>"},
                  {"clean_up_tokenization_spaces", false}}));
  EXPECT_FALSE(fs::exists(folder / "vocab.json"));

  // Llama 3's kind: the post-processor puts <|begin_of_text|> first (it
  // stays the post-processor's: no bos_token, which a template's
  // {{ bos_token }} would write where training wrote none), and "padding"
  // names <|pad|>: the pad token too.
  json vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}};
  json tokenizer =
      lt::testing::byte_level_tokenizer(vocab, {lt::testing::special_token(3, "<|begin_of_text|>"),
                                                lt::testing::special_token(4, "<|end_of_text|>"),
                                                lt::testing::special_token(5, "<|pad|>")});
  tokenizer["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}};
  tokenizer["padding"] = {{"strategy", "BatchLongest"}, {"pad_id", 5}, {"pad_token", "<|pad|>"}};
  fs::create_directories(tmp / "llama3");
  write_text(tmp / "llama3" / "tokenizer.json", tokenizer.dump());
  EXPECT_EQ(write_tokenizer_files_for_transformers(tmp / "llama3"),
            (std::vector<std::string>{"tokenizer_config.json"}));
  EXPECT_EQ(read_json(tmp / "llama3" / "tokenizer_config.json"),
            json({{"tokenizer_class", "PreTrainedTokenizerFast"},
                  {"eos_token", "<|end_of_text|>"},
                  {"pad_token", "<|pad|>"},
                  {"clean_up_tokenization_spaces", false}}));
}

// The files are computed once for a tokenizer's bytes (each save of a run
// copies the same one): a folder whose tokenizer.json differs, at the same
// path, gets its own, not the first one's.
TEST(TokenizerFilesForTransformers, AnotherTokenizerAtTheSamePathGetsItsOwnFiles) {
  const TempDir tmp("tokenizer_files_again");
  const fs::path folder = tmp / "tok";
  for (const std::string eos : {"<|endoftext|>", "</s>"}) {
    fs::remove_all(folder);
    fs::create_directories(folder);
    json vocab = {{"<unk>", 0}, {"a", 1}};
    write_text(folder / "tokenizer.json", lt::testing::byte_level_tokenizer(
                                              vocab, {lt::testing::special_token(2, eos.c_str())})
                                              .dump());
    EXPECT_EQ(write_tokenizer_files_for_transformers(folder),
              (std::vector<std::string>{"tokenizer_config.json"}));
    EXPECT_EQ(read_json(folder / "tokenizer_config.json").at("eos_token"), eos);
  }
}

// A file already there is the tokenizer's own and is kept; a tokenizer this
// program cannot read, or a tokenizer.model alone, gets nothing.
TEST(TokenizerFilesForTransformers, FilesThereAreKeptAndUnknownTokenizersLeftAlone) {
  const TempDir tmp("tokenizer_files_kept");
  const fs::path folder = copy_files(kGpt2, {"encoder.json", "vocab.bpe"}, tmp / "tok");
  write_text(folder / "tokenizer_config.json", "{\"model_max_length\": 1024}\n");
  EXPECT_EQ(write_tokenizer_files_for_transformers(folder),
            (std::vector<std::string>{"vocab.json", "merges.txt"}));
  EXPECT_EQ(read_text(folder / "tokenizer_config.json"), "{\"model_max_length\": 1024}\n");

  fs::create_directories(tmp / "broken");
  write_text(tmp / "broken" / "tokenizer.json", "{\"model\": ");
  EXPECT_TRUE(write_tokenizer_files_for_transformers(tmp / "broken").empty());
  EXPECT_FALSE(fs::exists(tmp / "broken" / "tokenizer_config.json"));

  fs::create_directories(tmp / "sentencepiece");
  write_text(tmp / "sentencepiece" / "tokenizer.model", "not read");
  EXPECT_TRUE(write_tokenizer_files_for_transformers(tmp / "sentencepiece").empty());
  EXPECT_TRUE(write_tokenizer_files_for_transformers(tmp / "empty").empty());
}

// The llama fixture's checkpoint of `step` in `out_dir`, carrying `tokenizer`.
fs::path save_with_tokenizer(const fs::path& out_dir, const models::CausalLM& model,
                             const fs::path& tokenizer, int64_t step) {
  CheckpointOptions options;
  options.tokenizer_dir = tokenizer;
  options.model_dir = fixture("llama");
  TrainerState state;
  state.step = step;
  return save_checkpoint(out_dir, model, {}, state, options);
}

// save_checkpoint writes them: the demo's GPT-2 files and the addition
// tokenizer, each reloading in lazytrain with the source's ids.
TEST(TokenizerFilesForTransformers, ACheckpointCarriesThemAndReloadsWithTheSameIds) {
  const TempDir tmp("tokenizer_files_checkpoint");
  const models::CausalLM model = io::load_hf_model(fixture("llama"));
  int64_t step = 0;
  for (const fs::path& tokenizer : {kGpt2, kAddition}) {
    SCOPED_TRACE(tokenizer.string());
    const fs::path dir = save_with_tokenizer(tmp.path(), model, tokenizer, ++step);
    EXPECT_TRUE(fs::exists(dir / "tokenizer_config.json"));
    EXPECT_EQ(ids_of(dir, kSample), ids_of(tokenizer, kSample));
  }
  const fs::path gpt2 = tmp / "step-1";
  EXPECT_EQ(read_json(gpt2 / "vocab.json"), read_json(kGpt2 / "encoder.json"));
  EXPECT_EQ(merges_as_transformers_reads(gpt2 / "merges.txt"),
            merges_as_transformers_reads(kGpt2 / "vocab.bpe"));
  EXPECT_EQ(read_json(gpt2 / "tokenizer_config.json").at("tokenizer_class"), "GPT2Tokenizer");
  EXPECT_EQ(read_json(tmp / "step-2" / "tokenizer_config.json").at("tokenizer_class"),
            "PreTrainedTokenizerFast");
}

// The claim itself, where the project's .venv has transformers
// (scripts/setup-test-venv.sh): AutoTokenizer loads each checkpoint's
// tokenizer, knows its EOS, and gives lazytrain's ids for a text.
TEST(TokenizerFilesForTransformers, TransformersLoadsACheckpointsTokenizer) {
  const fs::path python = fs::path(LT_SOURCE_DIR) / ".venv" / "bin" / "python";
  if (!fs::exists(python) ||
      std::system((python.string() + " -c 'import transformers' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "no .venv python with transformers (scripts/setup-test-venv.sh)";
  const TempDir tmp("tokenizer_files_transformers");
  const models::CausalLM model = io::load_hf_model(fixture("llama"));
  const std::string text = "Kim has 12 shells and gets 64 more. How many shells does Kim have now?";
  int64_t step = 0;
  for (const fs::path& tokenizer : {kGpt2, kAddition}) {
    SCOPED_TRACE(tokenizer.string());
    const fs::path dir = save_with_tokenizer(tmp.path(), model, tokenizer, ++step);
    const fs::path out = tmp / ("transformers-" + std::to_string(step) + ".json");
    const std::string script =
        "import json, sys; from transformers import AutoTokenizer; "
        "t = AutoTokenizer.from_pretrained(sys.argv[1]); "
        "json.dump({'eos': t.eos_token, 'eos_id': t.eos_token_id, "
        "'ids': t.encode(sys.argv[2], add_special_tokens=False)}, open(sys.argv[3], 'w'))";
    const std::string command = python.string() + " -c \"" + script + "\" '" + dir.string() +
                                "' '" + text + "' '" + out.string() + "' 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const json loaded = read_json(out);
    const json config = read_json(dir / "tokenizer_config.json");
    EXPECT_EQ(loaded.at("eos"), config.at("eos_token"));
    const data::Tokenizer ours = data::Tokenizer::load(tokenizer);
    EXPECT_EQ(loaded.at("eos_id").get<uint32_t>(),
              ours.token_to_id(config.at("eos_token").get<std::string>()).value());
    EXPECT_EQ(loaded.at("ids").get<std::vector<uint32_t>>(), ours.encode(text));
  }
}

}  // namespace
}  // namespace lt::train::testing
