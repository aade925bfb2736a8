// `lazytrain convert` replaces --out whole, or not at all: a full disk
// midway once left a new config.json (float32) beside the old bf16
// weights, and a tokenizer.json of an earlier folder survived beside new
// weights. The full disk is a file size limit (ulimit -f, SIGXFSZ
// ignored), under which write(2) fails with EFBIG as it would with ENOSPC.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "io/hf_model.h"
#include "models/causal_lm.h"
#include "support/fixture_tokenizers.h"

namespace lt {
namespace {

namespace fs = std::filesystem;

const fs::path kLlama = lt::testing::llama_fixture();
const fs::path kQwen3Tokenizer = lt::testing::qwen3_tokenizer_dir();

using lt::testing::copy_of_llama;
using lt::testing::write_letters_tokenizer;

// The line for the fixture's reference.safetensors, which convert leaves.
const std::string kNotCopiedReference =
    "not copied: reference.safetensors (convert copies the tokenizer, generation and license "
    "files and README.md; the weights and config.json it writes anew)\n";

class ConvertCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lt_convert_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `lazytrain convert ARGS` under `shell_prefix`; output with stderr.
  std::string convert(const std::string& args, int* status, const std::string& shell_prefix = "") {
    const std::string cmd =
        shell_prefix + std::string(LT_BINARY_DIR) + "/lazytrain convert " + args + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    *status = pclose(pipe);
    return out;
  }

  // Every file of a folder, by name, with its bytes.
  static std::map<std::string, std::string> contents(const fs::path& folder) {
    std::map<std::string, std::string> files;
    for (const auto& entry : fs::directory_iterator(folder)) {
      std::ifstream in(entry.path(), std::ios::binary);
      files[entry.path().filename().string()] = std::string(std::istreambuf_iterator<char>(in), {});
    }
    return files;
  }

  // Names in dir_ other than the ones given: leftovers of a convert.
  std::vector<std::string> leftovers(const std::set<std::string>& expected) const {
    std::vector<std::string> extra;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (!expected.count(name)) extra.push_back(name);
    }
    return extra;
  }

  fs::path dir_;
};

TEST_F(ConvertCommand, AFullDiskLeavesTheOldFolderAsItWas) {
  const fs::path out = dir_ / "out";
  int status = 0;
  std::string log =
      convert("--dtype bf16 --model " + kLlama.string() + " --out " + out.string(), &status);
  ASSERT_EQ(status, 0) << log;
  const auto before = contents(out);
  ASSERT_TRUE(before.count("config.json") && before.count("model.safetensors"));

  // 8 blocks (4 KiB in dash's 512-byte units, 8 KiB in bash's) hold the
  // config (under 1 KiB) but not the f32 weights (some 130 KB).
  log = convert("--dtype f32 --model " + kLlama.string() + " --out " + out.string(), &status,
                "trap '' XFSZ; ulimit -f 8; ");
  EXPECT_NE(status, 0) << log;
  EXPECT_EQ(contents(out), before) << log;
  EXPECT_EQ(leftovers({"out"}), std::vector<std::string>{}) << log;

  // Without the limit the same command replaces it.
  log = convert("--dtype f32 --model " + kLlama.string() + " --out " + out.string(), &status);
  ASSERT_EQ(status, 0) << log;
  EXPECT_NE(contents(out).at("config.json"), before.at("config.json"));
  EXPECT_EQ(leftovers({"out"}), std::vector<std::string>{}) << log;
}

TEST_F(ConvertCommand, NoFileOfTheEarlierFolderSurvives) {
  // A model with a tokenizer, converted first; then one without.
  const fs::path with_tokenizer = copy_of_llama(dir_ / "with_tokenizer");
  write_letters_tokenizer(with_tokenizer, 96);
  const fs::path out = dir_ / "out";
  int status = 0;
  std::string log =
      convert("--model " + with_tokenizer.string() + " --out " + out.string(), &status);
  ASSERT_EQ(status, 0) << log;
  ASSERT_TRUE(fs::exists(out / "tokenizer.json"));
  log = convert("--max-shard-gb 0.00005 --model " + kLlama.string() + " --out " + out.string(),
                &status);
  ASSERT_EQ(status, 0) << log;
  EXPECT_FALSE(fs::exists(out / "tokenizer.json")) << "a stale tokenizer.json survived";
  // Sharded now: the single file of the first save is gone too.
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(out / "generation_config.json"));
}

TEST_F(ConvertCommand, AnOutHoldingOtherFilesIsRefusedAndKept) {
  const fs::path out = dir_ / "out";
  fs::create_directories(out);
  std::ofstream(out / "notes.md") << "mine\n";
  int status = 0;
  const std::string log = convert("--model " + kLlama.string() + " --out " + out.string(), &status);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(log.find("--out " + out.string() + " holds 1 entry convert does not write (notes.md)"),
            std::string::npos)
      << log;
  EXPECT_EQ(contents(out), (std::map<std::string, std::string>{{"notes.md", "mine\n"}}));
  std::ofstream(out / "todo.md") << "also mine\n";
  const std::string two = convert("--model " + kLlama.string() + " --out " + out.string(), &status);
  EXPECT_NE(status, 0) << two;
  EXPECT_NE(two.find("--out " + out.string() +
                     " holds 2 entries convert does not write (notes.md, todo.md)"),
            std::string::npos)
      << two;
}

// A folder without config.json (a GGUF download, PyTorch's .bin weights)
// is refused as train refuses it, naming --model, the folder and the file
// it holds that this program does not read; before --out is looked at.
// It said only "config '.../config.json': cannot open".
TEST_F(ConvertCommand, AFolderWithoutConfigJsonIsRefusedNamingWhatItHolds) {
  // The folder, the one file it holds, and what the message says of it.
  const std::vector<std::array<std::string, 3>> folders = {
      {"gguf2", "model-q4.gguf",
       "(weights in a format this program does not read: it reads safetensors)"},
      {"bin", "pytorch_model.bin", "(PyTorch's pickled weights, which this program does not read"}};
  for (const auto& [name, file, what] : folders) {
    const fs::path folder = dir_ / name;
    fs::create_directories(folder);
    std::ofstream(folder / file) << "weights";
    int status = 0;
    const std::string log =
        convert("--model " + folder.string() + " --out " + (dir_ / "o").string(), &status);
    EXPECT_NE(status, 0) << log;
    EXPECT_NE(
        log.find("lazytrain: error: --model '" + folder.string() +
                 "' is not a model folder (no config.json there); it holds " + file + " " + what),
        std::string::npos)
        << log;
  }
  EXPECT_FALSE(fs::exists(dir_ / "o"));
}

// f16 holds no finite value above 65504: a weight beyond it would be
// written as inf, so --dtype f16 is refused naming the tensor, and bf16
// writes it. A NaN already in the weights is written as it is, and said.
TEST_F(ConvertCommand, AWeightBeyondTheDtypesRangeIsRefusedAndANanIsSaid) {
  models::CausalLM model = io::load_hf_model(kLlama);
  for (const auto& [name, t] : model.parameters()) {
    if (name.find("norm") == std::string::npos || t.dim() != 1) continue;
    t.data<float>()[0] = 1e5f;  // the first norm: model.layers.0.input_layernorm.weight
    t.data<float>()[1] = std::nanf("");
    break;
  }
  fs::create_directories(dir_ / "big");
  io::save_hf_model(model, dir_ / "big", DType::F32);
  int status = 0;
  std::string log = convert(
      "--dtype f16 --model " + (dir_ / "big").string() + " --out " + (dir_ / "f16").string(),
      &status);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(log.find("--dtype f16: " + (dir_ / "big").string() +
                     " holds weights beyond f16's range, which would be written as inf: "
                     "model.layers.0.input_layernorm.weight (1 value, the largest 100000)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("use --dtype bf16 or f32"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir_ / "f16"));
  log = convert(
      "--dtype bf16 --model " + (dir_ / "big").string() + " --out " + (dir_ / "bf16").string(),
      &status);
  EXPECT_EQ(status, 0) << log;
  EXPECT_NE(log.find("warning: " + (dir_ / "big").string() +
                     " holds weights that are NaN or inf (written as they are): "
                     "model.layers.0.input_layernorm.weight (1 value)"),
            std::string::npos)
      << log;
}

TEST_F(ConvertCommand, ErrorsNameTheOption) {
  const fs::path file = dir_ / "a_file";
  std::ofstream(file) << "x";
  int status = 0;
  std::string log = convert("--model " + kLlama.string() + " --out " + file.string(), &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(log.find("--out " + file.string()), std::string::npos) << log;
  EXPECT_EQ(log.find("unexpected error"), std::string::npos) << log;

  const std::regex long_number("[0-9]{20}");
  for (const std::string value : {"0", "-1", "nan"}) {
    log = convert("--max-shard-gb " + value + " --model " + kLlama.string() + " --out " +
                      (dir_ / "out").string(),
                  &status);
    EXPECT_NE(status, 0) << value;
    EXPECT_NE(log.find("--max-shard-gb"), std::string::npos) << value << ": " << log;
    EXPECT_FALSE(std::regex_search(log, long_number)) << value << ": " << log;
  }
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

// The tokenizer's ids index the embedding's vocab_size rows: a tokenizer
// whose vocabulary has an id at or past them is refused, naming both files
// and both numbers, and nothing is written. Fewer ids than rows (a padded
// vocabulary, as Qwen's 151936 rows for 151669 ids) passes without a word.
TEST_F(ConvertCommand, ATokenizerWhoseIdsPassTheVocabularyIsRefused) {
  const fs::path model = copy_of_llama(dir_ / "model");
  const fs::path out = dir_ / "out";
  const std::string args = "--model " + model.string() + " --out " + out.string();
  int status = 0;
  // Qwen3's tokenizer: <|endoftext|> .. </think> added up to id 151668.
  fs::copy_file(kQwen3Tokenizer / "tokenizer.json", model / "tokenizer.json");
  std::string log = convert(args, &status);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(log.find((model / "tokenizer.json").string() +
                     ": the tokenizer's largest token id is 151668, but " +
                     (model / "config.json").string() + " has vocab_size 97"),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(out));
  // One vocabulary id past the last row (96) is enough: "zz" at 97.
  nlohmann::json vocab = {{"<unk>", 0}, {"zz", 97}};
  for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = c - 'a' + 1;
  std::ofstream(model / "tokenizer.json")
      << lt::testing::byte_level_tokenizer(vocab, {lt::testing::special_token(27, "<|endoftext|>")})
             .dump();
  log = convert(args, &status);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(log.find("largest token id is 97, but " + (model / "config.json").string() +
                     " has vocab_size 97"),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(out));

  for (const int64_t largest_id : {96, 40}) {
    write_letters_tokenizer(model, largest_id);
    log = convert(args, &status);
    EXPECT_EQ(status, 0) << largest_id << ": " << log;
    EXPECT_EQ(log, "wrote " + out.string() + " (32496 parameters, bf16)\ncopied from " +
                       model.string() +
                       ": generation_config.json, tokenizer.json\nwrote for transformers' "
                       "tokenizer loader: tokenizer_config.json\n" +
                       kNotCopiedReference)
        << largest_id;
    EXPECT_TRUE(fs::exists(out / "tokenizer.json")) << largest_id;
    // The folder had no tokenizer_config.json: transformers' AutoTokenizer
    // needs one to take the class, and its EOS, from.
    const auto config = nlohmann::json::parse(contents(out).at("tokenizer_config.json"));
    EXPECT_EQ(config.at("tokenizer_class"), "PreTrainedTokenizerFast") << largest_id;
    EXPECT_EQ(config.at("eos_token"), "<|endoftext|>") << largest_id;
  }
  // One this program cannot read is copied unchecked, saying so.
  std::ofstream(model / "tokenizer.json") << "{\"model\":";
  log = convert(args, &status);
  EXPECT_EQ(status, 0) << log;
  EXPECT_NE(log.find("warning: " + model.string() + ": the tokenizer cannot be read (" +
                     (model / "tokenizer.json").string() + ": not valid JSON"),
            std::string::npos)
      << log;
}

// Added tokens alone past the rows (early Llama 2's <pad> at 32000 for
// 32000 rows; here <pad> at 97 for the fixture's 97) are the model's own
// tokenizer given tokens after its embedding was sized: converted, with
// the warning train, eval and generate give (Note [Added tokens past the
// embedding]), the tokenizer copied as it is. Convert used to refuse it.
TEST_F(ConvertCommand, ATokenizerWhoseAddedTokensAlonePassTheRowsIsConvertedWithAWarning) {
  const fs::path model = copy_of_llama(dir_ / "model");
  const fs::path out = dir_ / "out";
  write_letters_tokenizer(model, 27, 97);
  int status = 0;
  const std::string log = convert("--model " + model.string() + " --out " + out.string(), &status);
  ASSERT_EQ(status, 0) << log;
  EXPECT_NE(log.find("warning: " + (model / "tokenizer.json").string() +
                     ": the added token <pad> (id 97) has no embedding row: " +
                     (model / "config.json").string() + " has vocab_size 97"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("wrote " + out.string() + " (32496 parameters, bf16)\n"), std::string::npos)
      << log;
  EXPECT_EQ(contents(out).at("tokenizer.json"), contents(model).at("tokenizer.json"));
  EXPECT_EQ(io::load_hf_model(out).config().vocab_size, 97);
}

// Llama's license asks that it go with the weights: convert copies the
// license files and the model card beside them (bytes as they are), says
// what it copied, and names in one line what it left. It dropped them
// without a word.
TEST_F(ConvertCommand, TheLicenseAndReadmeGoWithTheWeights) {
  const fs::path model = copy_of_llama(dir_ / "model");
  const std::map<std::string, std::string> notes = {
      {"LICENSE", "LLAMA 3.1 COMMUNITY LICENSE AGREEMENT\n"},
      {"LICENSE.txt", "Apache License 2.0\n"},
      {"NOTICE", "Copyright the authors\n"},
      {"README.md", "# A model card\n"},
      {"USE_POLICY.md", "# Acceptable Use Policy\n"},
  };
  for (const auto& [name, text] : notes) std::ofstream(model / name) << text;
  std::ofstream(model / "Responsible-Use-Guide.pdf") << "%PDF";
  std::ofstream(model / ".gitattributes") << "*.safetensors filter=lfs\n";
  fs::create_directories(model / "original");
  std::ofstream(model / "original" / "params.json") << "{}";
  const fs::path out = dir_ / "out";
  int status = 0;
  std::string log = convert("--model " + model.string() + " --out " + out.string(), &status);
  ASSERT_EQ(status, 0) << log;
  EXPECT_EQ(log, "wrote " + out.string() + " (32496 parameters, bf16)\ncopied from " +
                     model.string() +
                     ": generation_config.json, LICENSE, LICENSE.txt, NOTICE, README.md, "
                     "USE_POLICY.md\nnot copied: .gitattributes, Responsible-Use-Guide.pdf, "
                     "original/, reference.safetensors (convert copies the tokenizer, generation "
                     "and license files and README.md; the weights and config.json it writes "
                     "anew)\n");
  const auto written = contents(out);
  for (const auto& [name, text] : notes) {
    ASSERT_TRUE(written.count(name)) << name;
    EXPECT_EQ(written.at(name), text) << name;
  }
  for (const char* left : {"Responsible-Use-Guide.pdf", ".gitattributes", "original"})
    EXPECT_FALSE(fs::exists(out / left)) << left;

  // They are convert's own in --out (it lists what it copied): converting
  // again replaces them, and a source without them leaves none behind.
  log = convert("--model " + model.string() + " --out " + out.string(), &status);
  ASSERT_EQ(status, 0) << log;
  log = convert("--model " + kLlama.string() + " --out " + out.string(), &status);
  ASSERT_EQ(status, 0) << log;
  EXPECT_EQ(log, "wrote " + out.string() + " (32496 parameters, bf16)\ncopied from " +
                     kLlama.string() + ": generation_config.json\n" + kNotCopiedReference);
  for (const auto& [name, text] : notes) EXPECT_FALSE(fs::exists(out / name)) << name;
  // A README.md convert did not put there is the user's, and is kept.
  std::ofstream(out / "README.md") << "# my notes on this run\n";
  log = convert("--model " + model.string() + " --out " + out.string(), &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(log.find("holds 1 entry convert does not write (README.md)"), std::string::npos) << log;
  EXPECT_EQ(contents(out).at("README.md"), "# my notes on this run\n");
}

}  // namespace
}  // namespace lt
