// What the data readers refuse before it costs a run: labels outside the
// model's vocabulary (named by file and line at load time, not at the step
// whose batch holds them), a line longer than any row (read in bounded
// memory), and inputs that are not regular files (a named pipe blocked the
// reader forever; /dev/zero grew memory without end). Also the format that
// `eval --format auto` resolves before choosing its reader.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "data/chat_template.h"
#include "data/dataset.h"
#include "data/dataset_source.h"
#include "data/token_rows.h"
#include "data/tokenizer.h"
#include "support/errors.h"
#include "support/fifo.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using lt::testing::error_of;

class InputLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("lt_input_limits_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }
  fs::path dir_;
};

// Labels are what the loss indexes. 97 is one past the vocabulary; -100
// is the ignore index and stays legal.
TEST_F(InputLimits, LabelsOutsideTheVocabularyNameTheFileLineAndField) {
  const fs::path file = write("rows.jsonl",
                              "{\"input_ids\": [1, 2, 3], \"labels\": [-100, 2, 3]}\n"
                              "\n"
                              "{\"input_ids\": [4, 5, 6], \"labels\": [-100, 5, 97]}\n");
  const std::vector<Sample> samples = load_dataset(file, nullptr, {}, nullptr);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[1].line, 3);
  const std::string message = error_of([&] { check_ids_in_vocab(samples, 97, file.string()); });
  EXPECT_NE(message.find(file.string() + ":3"), std::string::npos) << message;
  EXPECT_NE(message.find("labels[2]"), std::string::npos) << message;
  EXPECT_NE(message.find("97"), std::string::npos) << message;
  // With a vocabulary of 98 every id and label fits.
  EXPECT_EQ(error_of([&] { check_ids_in_vocab(samples, 98, file.string()); }), "<no error>");

  // An input id outside it is named the same way.
  const fs::path ids = write("ids.jsonl", "{\"input_ids\": [4, 5]}\n{\"input_ids\": [4, 99]}\n");
  const std::string id_message =
      error_of([&] { check_ids_in_vocab(load_dataset(ids, nullptr, {}, nullptr), 97, "ids"); });
  EXPECT_NE(id_message.find("ids:2"), std::string::npos) << id_message;
  EXPECT_NE(id_message.find("99"), std::string::npos) << id_message;
  // No tokenizer read these rows: the hint is about the ids, not one.
  EXPECT_EQ(id_message,
            "ids:2: token id 99 (position 1 of the row) is outside the model's vocabulary [0, "
            "97): the ids were made for another vocabulary (a row of input_ids is used as it is: "
            "tokenize its text with this model's tokenizer), or are an added token of the "
            "tokenizer past it (said at the start, when a tokenizer was read)");
}

// A line past kMaxLineBytes is refused once that many bytes are read, not
// after reading it whole; the rows before it do not matter.
TEST_F(InputLimits, ALineLongerThanAnyRowIsAnErrorNamingTheFileAndLine) {
  const fs::path file = dir_ / "huge.jsonl";
  {
    std::ofstream out(file, std::ios::binary);
    out << "{\"input_ids\": [1, 2]}\n{\"text\": \"";
    const std::string block(1 << 20, 'x');
    for (size_t written = 0; written <= kMaxLineBytes; written += block.size()) out << block;
    out << "\"}\n";
  }
  for (const auto& [what, load] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"load_dataset", [&] { load_dataset(file, nullptr, {}, nullptr); }},
           {"read_token_rows", [&] { read_token_rows(file); }}}) {
    const std::string message = error_of(load);
    EXPECT_NE(message.find(file.string() + ":2"), std::string::npos) << what << ": " << message;
    EXPECT_NE(message.find("longer than 64 MiB"), std::string::npos) << what << ": " << message;
  }
}

TEST_F(InputLimits, DatasetsAndTokenizerFilesMustBeRegularFiles) {
  const fs::path fifo = dir_ / "rows.jsonl";
  lt::testing::make_fifo(fifo);
  for (const auto& [what, load] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"load_dataset", [&] { load_dataset(fifo, nullptr, {}, nullptr); }},
           {"read_token_rows", [&] { read_token_rows(fifo); }},
           {"detect_format", [&] { detect_format(fifo, {}); }}}) {
    const auto result = lt::testing::error_of_fifo_load(fifo, load);
    EXPECT_FALSE(result.blocked) << what << " waited on the named pipe";
    EXPECT_NE(result.error.find(fifo.string()), std::string::npos) << what << ": " << result.error;
    EXPECT_NE(result.error.find("named pipe"), std::string::npos) << what << ": " << result.error;
  }

  // /dev/zero never ends: a dataset read from it grew memory until killed.
  const std::string zero = error_of([] { load_dataset("/dev/zero", nullptr, {}, nullptr); });
  EXPECT_NE(zero.find("/dev/zero"), std::string::npos) << zero;
  EXPECT_NE(zero.find("character device"), std::string::npos) << zero;

  // Each file beside a tokenizer, in turn a named pipe.
  const fs::path qwen3 = testing::fixtures_dir() / "qwen3";
  for (const std::string name :
       {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) {
    const fs::path folder = dir_ / ("tok_" + name);
    fs::create_directories(folder);
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      if (file != name) fs::copy_file(qwen3 / file, folder / file);
    }
    lt::testing::make_fifo(folder / name);
    const auto result = lt::testing::error_of_fifo_load(folder / name, [&] {
      if (name == "tokenizer.json") Tokenizer::load(folder);
      read_tokenizer_config(folder);
    });
    EXPECT_FALSE(result.blocked) << name << " waited on the named pipe";
    EXPECT_NE(result.error.find((folder / name).string()), std::string::npos)
        << name << ": " << result.error;
  }
}

TEST_F(InputLimits, DetectFormatReadsTheFirstObjectRowAsTheLoaderDoes) {
  DatasetOptions options;
  EXPECT_EQ(detect_format(write("t.jsonl", "not json\n{\"input_ids\": [1]}\n"), options), "tokens");
  EXPECT_EQ(detect_format(write("q.json", "[{\"question\": \"q\", \"answer\": \"a\"}]"), options),
            "query_response");
  EXPECT_EQ(detect_format(write("p.txt", "Some text.\n"), options), "text");
  EXPECT_EQ(detect_format(testing::fixtures_dir() / "datasets" / "sharegpt.jsonl", options),
            "sharegpt");
  options.format = "alpaca";
  EXPECT_EQ(detect_format(write("x.jsonl", "{\"input_ids\": [1]}\n"), options), "alpaca");
  options.format = "auto";
  const std::string message = error_of([&] { detect_format(write("n.jsonl", "[1]\n"), options); });
  EXPECT_NE(message.find("n.jsonl"), std::string::npos) << message;
}

}  // namespace
}  // namespace lt::data
