// Files that are not text given as data (Note [Files that are not text]):
// a Parquet, Arrow, gzip or zstd file is told by its first bytes, a CSV or
// TSV file by its name, and each is refused naming the file, what it is and
// the command that converts it. They failed as "not valid JSON" or
// "invalid UTF-8 (byte 0x8B ...)", which says nothing of what the file is.
// The magic numbers are the formats' own (Parquet's "PAR1", Arrow's
// "ARROW1" and stream continuation marker FF FF FF FF, gzip's 1F 8B,
// zstd's 28 B5 2F FD, as `file` tells them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "data/dataset.h"
#include "data/dataset_source.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

class DatasetOtherFormats : public ::testing::Test {
 protected:
  DatasetOtherFormats()
      : dir_(fs::temp_directory_path() / ("lazytrain_other_formats_" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
  }
  ~DatasetOtherFormats() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& bytes) const {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return dir_ / name;
  }
  // The lt::Error `fn` throws.
  template <typename Fn>
  static std::string error_of(Fn&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an lt::Error";
    return {};
  }
  static std::string detect_error(const fs::path& file) {
    return error_of([&] { detect_format(file, DatasetOptions{}); });
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

constexpr const char* kReads = "; lazytrain reads JSON Lines, a JSON array or text (.txt). ";

TEST_F(DatasetOtherFormats, AParquetFileIsNamedWithTheDatasetsLineThatConvertsIt) {
  // A Parquet file's first bytes: "PAR1", then a page header.
  const fs::path f = write("train-00000-of-00001.parquet", "PAR1\x15\x04\x15\x80\x01"s);
  EXPECT_EQ(detect_error(f),
            f.string() + " is a Parquet file (it starts with \"PAR1\")" + kReads +
                "Convert it first: python3 -c 'import datasets; datasets.Dataset.from_parquet(\"" +
                f.string() + "\").to_json(\"" + path("train-00000-of-00001.jsonl") + "\")'");
  // Whatever its name, and whatever the format asked for.
  const fs::path named_jsonl = write("data.jsonl", "PAR1\x15\x04"s);
  EXPECT_EQ(detect_error(named_jsonl),
            named_jsonl.string() + " is a Parquet file (it starts with \"PAR1\")" + kReads +
                "Convert it first: python3 -c 'import datasets; datasets.Dataset.from_parquet(\"" +
                named_jsonl.string() + "\").to_json(\"" + path("data.converted.jsonl") + "\")'");
  DatasetOptions text;
  text.format = "text";
  const Tokenizer& gpt2 = testing::reference_tokenizer("gpt2");
  EXPECT_NE(error_of([&] {
              load_dataset(f, &gpt2, text, nullptr);
            }).find(" is a Parquet file (it starts with \"PAR1\")"),
            std::string::npos);
}

TEST_F(DatasetOtherFormats, GzipAndZstdFilesAreNamedWithTheCommandThatDecompressesThem) {
  // gzip: 1F 8B, method 08 (deflate).
  const fs::path gz = write("train.jsonl.gz", "\x1F\x8B\x08\x00\x00\x00\x00\x00\x00\x03"s);
  EXPECT_EQ(detect_error(gz), gz.string() + " is gzip-compressed (it starts with bytes 1F 8B)" +
                                  kReads + "Convert it first: gunzip -k " + gz.string() +
                                  " (it writes " + path("train.jsonl") + ")");
  // Without a .gz name gunzip refuses it ("unknown suffix"): zcat.
  const fs::path gz_named_jsonl = write("rows.jsonl", "\x1F\x8B\x08\x00"s);
  EXPECT_EQ(detect_error(gz_named_jsonl),
            gz_named_jsonl.string() + " is gzip-compressed (it starts with bytes 1F 8B)" + kReads +
                "Convert it first: zcat " + gz_named_jsonl.string() + " > " +
                path("rows.decompressed.jsonl"));
  // zstd: the frame magic 0xFD2FB528, little-endian.
  const fs::path zst = write("train.jsonl.zst", "\x28\xB5\x2F\xFD\x04\x58"s);
  EXPECT_EQ(detect_error(zst), zst.string() +
                                   " is zstd-compressed (it starts with bytes 28 B5 2F FD)" +
                                   kReads + "Convert it first: zstd -d " + zst.string() +
                                   " (it writes " + path("train.jsonl") + ")");
  const fs::path zst_named_json = write("rows.json", "\x28\xB5\x2F\xFD\x04\x58"s);
  EXPECT_EQ(detect_error(zst_named_json),
            zst_named_json.string() + " is zstd-compressed (it starts with bytes 28 B5 2F FD)" +
                kReads + "Convert it first: zstd -dc " + zst_named_json.string() + " > " +
                path("rows.decompressed.json"));
  // A .txt file too: it was read as text, its compressed bytes trained on.
  const fs::path txt = write("notes.txt", "\x1F\x8B\x08\x00"s);
  EXPECT_EQ(error_of([&] { detect_layout(txt); }),
            txt.string() + " is gzip-compressed (it starts with bytes 1F 8B)" + kReads +
                "Convert it first: zcat " + txt.string() + " > " + path("notes.decompressed.txt"));
}

TEST_F(DatasetOtherFormats, ArrowFilesAreNamedWithTheCommandThatConvertsThem) {
  // The IPC file format (Feather 2): "ARROW1", two bytes of padding.
  const fs::path file = write("rows.arrow", "ARROW1\0\0\xFF\xFF\xFF\xFF"s);
  EXPECT_EQ(detect_error(file),
            file.string() + " is an Arrow IPC file (it starts with \"ARROW1\")" + kReads +
                "Convert it first: python3 -c 'import pandas; pandas.read_feather(\"" +
                file.string() + "\").to_json(\"" + path("rows.jsonl") +
                "\", orient=\"records\", lines=True, force_ascii=False)'");
  // The IPC stream format, as datasets' save_to_disk writes data-*.arrow:
  // a continuation marker, then the metadata's length.
  const fs::path stream = write("data-00000-of-00001.arrow", "\xFF\xFF\xFF\xFF\x78\x00\x00\x00"s);
  EXPECT_EQ(detect_error(stream),
            stream.string() +
                " is an Arrow IPC stream (it starts with bytes FF FF FF FF), as Hugging Face "
                "datasets saves" +
                kReads +
                "Convert it first: python3 -c 'import datasets; datasets.Dataset.from_file(\"" +
                stream.string() + "\").to_json(\"" + path("data-00000-of-00001.jsonl") + "\")'");
}

TEST_F(DatasetOtherFormats, CsvAndTsvFilesAreNamedByTheirExtension) {
  const fs::path csv = write("train.CSV", "question,answer\n1+1,2\n");
  EXPECT_EQ(detect_error(csv),
            csv.string() + " is a CSV file" + kReads +
                "Convert it first: python3 -c 'import datasets; datasets.Dataset.from_csv(\"" +
                csv.string() + "\").to_json(\"" + path("train.jsonl") + "\")'");
  // The tab as Python's "\t" inside the shell's single quotes.
  const fs::path tsv = write("train.tsv", "question\tanswer\n1+1\t2\n");
  EXPECT_EQ(detect_error(tsv),
            tsv.string() + " is a TSV file" + kReads +
                "Convert it first: python3 -c 'import datasets; datasets.Dataset.from_csv(\"" +
                tsv.string() + "\", sep=\"\\t\").to_json(\"" + path("train.jsonl") + "\")'");
}

// JSON Lines, a JSON array and text still read; a text file that starts
// like no magic number is text.
TEST_F(DatasetOtherFormats, TextFilesAreNotTakenForOtherFormats) {
  EXPECT_EQ(detect_layout(write("a.jsonl", "{\"text\": \"PAR1\"}\n")), SourceLayout::kJsonLines);
  EXPECT_EQ(detect_layout(write("b.json", "[{\"text\": \"x\"}]")), SourceLayout::kJsonArray);
  EXPECT_EQ(detect_layout(write("c.txt", "PAR 1 is a paragraph\n")), SourceLayout::kTextParagraphs);
  EXPECT_EQ(detect_layout(write("d.jsonl", "")), SourceLayout::kJsonLines);
  EXPECT_EQ(detect_layout(write("e.jsonl", "P")), SourceLayout::kJsonLines);
}

}  // namespace
}  // namespace lt::data
