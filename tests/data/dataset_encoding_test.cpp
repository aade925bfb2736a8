// Files that are not UTF-8, and rows whose text is not Unicode, against
// what their bytes are: data.format auto names the first such problem (it
// said only that no row is a JSON object), and a UTF-16 file is refused
// by name, with the iconv command that converts it, whatever the format.
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

class DatasetEncoding : public ::testing::Test {
 protected:
  DatasetEncoding()
      : dir_(fs::temp_directory_path() / ("lazytrain_encoding_" + std::to_string(getpid()))) {
    fs::create_directories(dir_);
  }
  ~DatasetEncoding() override { fs::remove_all(dir_); }
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

// ASCII text in UTF-16: each character's byte beside a NUL.
std::string utf16(const std::string& ascii, bool little_endian) {
  std::string out;
  for (char c : ascii) out += little_endian ? std::string{c, '\0'} : std::string{'\0', c};
  return out;
}

const std::string kRows = "{\"text\": \"hi\"}\n{\"text\": \"there\"}\n";

TEST_F(DatasetEncoding, AUtf16FileIsNamedWithTheCommandThatConvertsIt) {
  const fs::path le_bom = write("le_bom.jsonl", "\xFF\xFE"s + utf16(kRows, true));
  EXPECT_EQ(detect_error(le_bom),
            le_bom.string() +
                " is UTF-16 (little-endian, byte order mark FF FE); convert it to UTF-8 (iconv -f "
                "UTF-16 -t UTF-8 " +
                le_bom.string() + " > " + (dir_ / "le_bom.utf8.jsonl").string() + ")");
  const fs::path be_bom = write("be_bom.json", "\xFE\xFF"s + utf16("[" + kRows + "]", false));
  EXPECT_NE(detect_error(be_bom).find(" is UTF-16 (big-endian, byte order mark FE FF); convert "
                                      "it to UTF-8 (iconv -f UTF-16 -t UTF-8 "),
            std::string::npos);
  // Without a mark the byte order is named: glibc's iconv takes "UTF-16"
  // without one as little-endian.
  const fs::path le = write("le.jsonl", utf16(kRows, true));
  EXPECT_NE(detect_error(le).find(" is UTF-16 (little-endian: every other byte is NUL); convert it "
                                  "to UTF-8 (iconv -f UTF-16LE -t UTF-8 "),
            std::string::npos);
  const fs::path be = write("be.jsonl", utf16(kRows, false));
  EXPECT_NE(detect_error(be).find("(iconv -f UTF-16BE -t UTF-8 "), std::string::npos);
  // Whatever the format, and for a .txt file too, which was read as text
  // with a NUL between its characters.
  DatasetOptions text;
  text.format = "text";
  const Tokenizer& gpt2 = testing::reference_tokenizer("gpt2");
  EXPECT_NE(error_of([&] { load_dataset(le_bom, &gpt2, text, nullptr); }).find(" is UTF-16 ("),
            std::string::npos);
  const fs::path txt = write("notes.txt", "\xFF\xFE"s + utf16("some text\n\nmore\n", true));
  EXPECT_NE(error_of([&] { load_dataset(txt, &gpt2, {}, nullptr); })
                .find("(iconv -f UTF-16 -t UTF-8 " + txt.string() + " > " +
                      (dir_ / "notes.utf8.txt").string() + ")"),
            std::string::npos);
  // A UTF-8 file with a NUL in a row (not valid JSON) is not UTF-16.
  const fs::path nul = write("nul.jsonl", "{\"text\": \"a\0b\"}\n"s + kRows);
  EXPECT_EQ(detect_format(nul, {}), "text");
}

TEST_F(DatasetEncoding, InvalidUtf8InEveryRowIsNamedByAuto) {
  // `{"text":"abc ` is 13 bytes: the bad byte is column 14.
  const fs::path f =
      write("bad.jsonl", "{\"text\":\"abc \xFF\xFE def\"}\n{\"text\":\"\xC0\xAF\"}\n");
  EXPECT_EQ(detect_error(f),
            f.string() +
                ": no row is a JSON object with fields, so the dataset format cannot be told; "
                "the first of its 2 rows: " +
                f.string() + ":1: field \"text\": invalid UTF-8 (byte 0xFF at column 14)");
  // A row that reads decides, after bad ones.
  const fs::path late =
      write("late.jsonl", "{\"text\":\"\xFF\"}\n{\"question\":\"q\",\"answer\":\"a\"}\n");
  EXPECT_EQ(detect_format(late, {}), "query_response");
  const fs::path empty = write("empty.jsonl", "\n  \n");
  EXPECT_EQ(detect_error(empty), empty.string() +
                                     ": no row is a JSON object with fields, so the dataset format "
                                     "cannot be told (the file has no rows)");
}

TEST_F(DatasetEncoding, ALoneSurrogateEscapeIsNamedWithItsColumn) {
  // `{"text":"abc ` is 13 bytes: the escape starts at column 14.
  const fs::path f = write("surrogate.jsonl", "{\"text\":\"abc \\ud800 def\"}\n");
  const std::string problem =
      f.string() +
      ":1: field \"text\": lone surrogate escape \\ud800 at column 14 (half of a UTF-16 pair, not "
      "a character)";
  EXPECT_EQ(detect_error(f),
            f.string() +
                ": no row is a JSON object with fields, so the dataset format cannot be told; "
                "the first of its 1 row: " +
                problem);
  // The same problem when the format is named.
  DatasetOptions text;
  text.format = "text";
  const Tokenizer& gpt2 = testing::reference_tokenizer("gpt2");
  EXPECT_EQ(error_of([&] { load_dataset(f, &gpt2, text, nullptr); }),
            f.string() + ": no usable samples (1 rows, 1 skipped; first problem: " + problem + ")");
  // A low half alone, a high half before another escape, and one after an
  // escaped quote in another field; a whole pair (U+1F600) is text.
  const fs::path more = write("more.jsonl",
                              "{\"text\": \"\\uDC00\"}\n"
                              "{\"text\": \"x\\uD83D\\u0041\"}\n"
                              "{\"system\": \"\\\"\", \"text\": \"\\\\\\ud800\"}\n"
                              "{\"text\": \"\\ud83d\\ude00\"}\n");
  DatasetReport report;
  DatasetOptions listing;  // three bad rows of four
  listing.accept_mostly_bad = true;
  EXPECT_EQ(load_dataset(more, &gpt2, listing, &report).size(), 1u);
  ASSERT_EQ(report.problems.size(), 3u);
  EXPECT_EQ(report.problems[0],
            more.string() +
                ":1: field \"text\": lone surrogate escape \\uDC00 at column 11 (half "
                "of a UTF-16 pair, not a character)");
  EXPECT_EQ(report.problems[1], more.string() +
                                    ":2: field \"text\": lone surrogate escape \\uD83D at column "
                                    "12 (half of a UTF-16 pair, not a character)");
  EXPECT_EQ(report.problems[2], more.string() +
                                    ":3: field \"text\": lone surrogate escape \\ud800 at column "
                                    "29 (half of a UTF-16 pair, not a character)");
}

// Objects pretty-printed over several lines in a .jsonl: every line "not
// valid JSON", and nothing said of why. The first line's problem says so.
TEST_F(DatasetEncoding, APrettyPrintedJsonlIsNamedAsOne) {
  const fs::path f =
      write("pretty.jsonl", "{\n  \"text\": \"hi\"\n}\n{\n  \"text\": \"there\"\n}\n");
  DatasetOptions text;
  text.format = "text";
  const Tokenizer& gpt2 = testing::reference_tokenizer("gpt2");
  const std::string m = error_of([&] { load_dataset(f, &gpt2, text, nullptr); });
  EXPECT_NE(m.find(f.string() + ":1: not valid JSON ("), std::string::npos) << m;
  EXPECT_NE(m.find("; the line ends inside the object: its closing bracket is missing, or the "
                   "object goes on past its line as in a pretty-printed file (a .jsonl row is "
                   "one whole object on one line"),
            std::string::npos)
      << m;
  // A row cut short in the middle is not taken for one.
  const fs::path cut = write("cut.jsonl", "{\"text\": \"hi\"}\n\"text\": \"th\n");
  DatasetOptions listing;
  listing.format = "text";
  listing.accept_mostly_bad = true;
  DatasetReport report;
  load_dataset(cut, &gpt2, listing, &report);
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0].find("pretty-printed"), std::string::npos) << report.problems[0];
}

// Chat rows under data.format query_response were told to name their
// prompt and response fields; the fields say the format to set.
TEST_F(DatasetEncoding, RowsOfAnotherFormatNameIt) {
  const fs::path chat = write("chat.jsonl",
                              "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
                              "{\"role\": \"assistant\", \"content\": \"hello\"}]}\n");
  DatasetOptions qr;
  qr.format = "query_response";
  const Tokenizer& gpt2 = testing::reference_tokenizer("gpt2");
  const std::string m = error_of([&] { load_dataset(chat, &gpt2, qr, nullptr); });
  EXPECT_NE(m.find(chat.string() + ":1: cannot find the prompt and response fields"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("; its fields are those of format sharegpt: set data.format to sharegpt (or "
                   "auto)"),
            std::string::npos)
      << m;
  // Fields of no format: no guess.
  const fs::path odd = write("odd.jsonl", "{\"q\": \"hi\", \"a\": \"there\"}\n");
  EXPECT_EQ(error_of([&] { load_dataset(odd, &gpt2, qr, nullptr); }).find("its fields are"),
            std::string::npos);
}

// With the prompt field named (or a known one found) the message names the
// other one alone: it told a user who had given --prompt-field to give it.
TEST_F(DatasetEncoding, AFieldFoundNamesOnlyTheOtherOne) {
  const fs::path odd = write("qa.jsonl", "{\"q\": \"hi\", \"a\": \"there\"}\n");
  const Tokenizer& gpt2 = testing::reference_tokenizer("gpt2");
  DatasetOptions given;
  given.format = "query_response";
  given.prompt_field = "q";
  EXPECT_EQ(error_of([&] { load_dataset(odd, &gpt2, given, nullptr); }),
            odd.string() +
                ":1: cannot find the response field (response, answer or completion) beside the "
                "prompt field \"q\"; name it with data.response_field");
  const fs::path half = write("half.jsonl", "{\"question\": \"hi\", \"a\": \"there\"}\n");
  DatasetOptions qr;
  qr.format = "query_response";
  EXPECT_EQ(error_of([&] { load_dataset(half, &gpt2, qr, nullptr); }),
            half.string() +
                ":1: cannot find the response field (response, answer or completion) beside the "
                "prompt field \"question\"; name it with data.response_field");
}

// Files that are not text given as data (Note [Files that are not text]):
// a Parquet, Arrow, gzip or zstd file is told by its first bytes, a CSV or
// TSV file by its name, and each is refused naming the file, what it is and
// the command that converts it. They failed as "not valid JSON" or
// "invalid UTF-8 (byte 0x8B ...)", which says nothing of what the file is.
// The magic numbers are the formats' own (Parquet's "PAR1", Arrow's
// "ARROW1" and stream continuation marker FF FF FF FF, gzip's 1F 8B,
// zstd's 28 B5 2F FD, as `file` tells them).
constexpr const char* kReads = "; lazytrain reads JSON Lines, a JSON array or text (.txt). ";

TEST_F(DatasetEncoding, AParquetFileIsNamedWithTheDatasetsLineThatConvertsIt) {
  // A Parquet file: "PAR1", a page header, ..., the footer's length and
  // "PAR1" again.
  const fs::path f =
      write("train-00000-of-00001.parquet", "PAR1\x15\x04\x15\x80\x01\x10\x00\x00\x00PAR1"s);
  EXPECT_EQ(detect_error(f),
            f.string() + " is a Parquet file (it starts and ends with \"PAR1\")" + kReads +
                "Convert it first: python3 -c 'import datasets; datasets.Dataset.from_parquet(\"" +
                f.string() + "\").to_json(\"" + path("train-00000-of-00001.jsonl") + "\")'");
  // Whatever its name, and whatever the format asked for.
  const fs::path named_jsonl = write("data.jsonl", "PAR1\x15\x04\x08\x00\x00\x00PAR1"s);
  EXPECT_EQ(detect_error(named_jsonl),
            named_jsonl.string() + " is a Parquet file (it starts and ends with \"PAR1\")" +
                kReads +
                "Convert it first: python3 -c 'import datasets; datasets.Dataset.from_parquet(\"" +
                named_jsonl.string() + "\").to_json(\"" + path("data.converted.jsonl") + "\")'");
  DatasetOptions text;
  text.format = "text";
  const Tokenizer& gpt2 = testing::reference_tokenizer("gpt2");
  EXPECT_NE(error_of([&] {
              load_dataset(f, &gpt2, text, nullptr);
            }).find(" is a Parquet file (it starts and ends with \"PAR1\")"),
            std::string::npos);
}

TEST_F(DatasetEncoding, GzipAndZstdFilesAreNamedWithTheCommandThatDecompressesThem) {
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

TEST_F(DatasetEncoding, ArrowFilesAreNamedWithTheCommandThatConvertsThem) {
  // The IPC file format (Feather 2): "ARROW1", two bytes of padding, ...,
  // the footer's length and "ARROW1" again.
  const fs::path file = write("rows.arrow",
                              "ARROW1\0\0\xFF\xFF\xFF\xFF\x10\x00\x00\x00"
                              "ARROW1"s);
  EXPECT_EQ(detect_error(file),
            file.string() + " is an Arrow IPC file (it starts and ends with \"ARROW1\")" + kReads +
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

TEST_F(DatasetEncoding, CsvAndTsvFilesAreNamedByTheirExtension) {
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
TEST_F(DatasetEncoding, TextFilesAreNotTakenForOtherFormats) {
  EXPECT_EQ(detect_layout(write("a.jsonl", "{\"text\": \"PAR1\"}\n")), SourceLayout::kJsonLines);
  EXPECT_EQ(detect_layout(write("b.json", "[{\"text\": \"x\"}]")), SourceLayout::kJsonArray);
  EXPECT_EQ(detect_layout(write("c.txt", "PAR 1 is a paragraph\n")), SourceLayout::kTextParagraphs);
  // Text that starts with a magic number's letters is text: a Parquet or
  // Arrow file ends with them too.
  EXPECT_EQ(detect_layout(write("f.txt", "PAR1 is the first paragraph's id.\n\nSecond.\n")),
            SourceLayout::kTextParagraphs);
  EXPECT_EQ(detect_layout(write("g.jsonl", "ARROW1 {\"text\": \"x\"}\n")),
            SourceLayout::kJsonLines);
  EXPECT_EQ(detect_layout(write("d.jsonl", "")), SourceLayout::kJsonLines);
  EXPECT_EQ(detect_layout(write("e.jsonl", "P")), SourceLayout::kJsonLines);
}

}  // namespace
}  // namespace lt::data
