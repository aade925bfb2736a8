#include "data/dataset_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/regular_file.h"

namespace lt::data {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

bool is_json_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(),
                     [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

std::ifstream open(const fs::path& file) {
  require_regular_file(file);
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file.string(), ": cannot open the file");
  return in;
}

std::string read_all(const fs::path& file) {
  std::ifstream in = open(file);
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) fail(file.string(), ": read error");
  std::string text = contents.str();
  if (std::string_view(text).starts_with(kByteOrderMark)) text.erase(0, kByteOrderMark.size());
  return text;
}

// Lines of at most kMaxLineBytes, read through a fixed buffer so that
// memory stays bounded whatever the file holds.
class LineReader {
 public:
  explicit LineReader(const fs::path& file) : file_(file), in_(open(file)), buffer_(1 << 20) {}

  // The next line, without its '\n', into `line`; false at the end of the
  // file. `line_no` is the line's number, for the error.
  bool next(std::string& line, int64_t line_no) {
    line.clear();
    while (true) {
      if (pos_ == end_ && !refill()) return !line.empty();
      const char* start = buffer_.data() + pos_;
      const char* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - pos_));
      const size_t take = newline ? static_cast<size_t>(newline - start) : end_ - pos_;
      if (line.size() + take > kMaxLineBytes) {
        fail(file_.string(), ":", line_no, ": the line is longer than ", kMaxLineBytes >> 20,
             " MiB, the most one row may hold; is this a JSON-lines dataset?");
      }
      line.append(start, take);
      pos_ += take;
      if (newline) {
        ++pos_;
        return true;
      }
    }
  }

 private:
  bool refill() {
    in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    if (in_.bad()) fail(file_.string(), ": read error");
    pos_ = 0;
    end_ = static_cast<size_t>(in_.gcount());
    return end_ > 0;
  }

  const fs::path& file_;
  std::ifstream in_;
  std::vector<char> buffer_;
  size_t pos_ = 0, end_ = 0;
};

void read_lines(const fs::path& file, const std::function<bool(const SourceRow&)>& on_row) {
  LineReader reader(file);
  std::string line;
  SourceRow row;
  while (reader.next(line, row.line + 1)) {
    ++row.line;
    std::string_view text = line;
    if (row.line == 1 && text.starts_with(kByteOrderMark))
      text.remove_prefix(kByteOrderMark.size());
    if (is_blank(text)) continue;
    row.text = text;
    if (!on_row(row)) return;
  }
}

// `text` with "\r\n" and a lone '\r' made '\n', as Python reads a text
// file (universal newlines; Hugging Face's text loader): a file saved on
// Windows trains on the same tokens as one saved elsewhere, not on a '\r'
// token in every line but a paragraph's last.
std::string universal_newlines(std::string text) {
  if (text.find('\r') == std::string::npos) return text;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\r') {
      out += text[i];
    } else {
      out += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    }
  }
  return out;
}

void read_paragraphs(const fs::path& file, const std::function<bool(const SourceRow&)>& on_row) {
  const std::string text = universal_newlines(read_all(file));
  std::string_view all = text;
  int64_t line_no = 0;
  size_t start = std::string_view::npos;  // first byte of the open paragraph
  int64_t start_line = 0;
  size_t end = 0;    // one past the last non-blank line of the open paragraph
  auto emit = [&] {  // false: the caller wants no more rows
    if (start == std::string_view::npos) return true;
    const std::string_view paragraph = all.substr(start, end - start);
    start = std::string_view::npos;
    return on_row(SourceRow{start_line, paragraph, {}});
  };
  for (size_t pos = 0; pos < all.size();) {
    size_t newline = all.find('\n', pos);
    size_t line_end = newline == std::string_view::npos ? all.size() : newline;
    ++line_no;
    if (is_blank(all.substr(pos, line_end - pos))) {
      if (!emit()) return;
    } else {
      if (start == std::string_view::npos) {
        start = pos;
        start_line = line_no;
      }
      end = line_end;
    }
    pos = newline == std::string_view::npos ? all.size() : newline + 1;
  }
  emit();
}

// Cuts a top-level JSON array into its elements; see the header.
void read_array(const fs::path& file, const std::function<bool(const SourceRow&)>& on_row) {
  const std::string text = read_all(file);
  const size_t n = text.size();
  size_t pos = 0;
  int64_t line = 1;
  auto skip_space = [&] {
    while (pos < n && is_json_space(text[pos])) line += text[pos++] == '\n';
  };
  auto problem = [&](int64_t at_line, size_t from, size_t to, std::string what) {
    return on_row(
        SourceRow{at_line, std::string_view(text).substr(from, to - from), std::move(what)});
  };

  skip_space();
  ++pos;  // the '[' that detect_layout saw
  skip_space();
  if (pos < n && text[pos] == ']') {
    ++pos;
  } else {
    while (true) {
      skip_space();
      const size_t start = pos;
      const int64_t start_line = line;
      int depth = 0;
      bool in_string = false;
      for (; pos < n; ++pos) {
        const char c = text[pos];
        if (c == '\n') ++line;
        if (in_string) {
          if (c == '\\' && pos + 1 < n) {
            line += text[++pos] == '\n';
          } else if (c == '"') {
            in_string = false;
          }
        } else if (c == '"') {
          in_string = true;
        } else if (c == '{' || c == '[') {
          ++depth;
        } else if (c == '}' || c == ']') {
          if (depth == 0) break;
          --depth;
        } else if (c == ',' && depth == 0) {
          break;
        }
      }
      size_t stop = pos;
      while (stop > start && is_json_space(text[stop - 1])) --stop;
      if (pos == n) {
        // Nothing follows to be read: the file is cut short (a copy or
        // download that stopped), said with its size, as a one-line
        // file's line number tells nothing.
        problem(start_line, start, stop,
                fmt::format("the file ends {} (after {} bytes): it looks cut off; the rows before "
                            "this one were read",
                            in_string ? "inside a string" : "before the array's closing ']'", n));
        return;
      }
      if (text[pos] == '}') {
        problem(start_line, start, stop,
                "unmatched '}' in the array; the rest of the file is not read");
        return;
      }
      const bool more =
          stop == start ? problem(start_line, start, stop, "empty array element")
                        : on_row(SourceRow{
                              start_line, std::string_view(text).substr(start, stop - start), {}});
      if (!more) return;
      if (text[pos++] == ']') break;
    }
  }
  skip_space();
  // Not a bad row to skip: the file is not the one array its first byte
  // promised (a JSON Lines file whose first line is an array), and what
  // follows, perhaps every other row, would go unread.
  if (pos < n)
    fail(file.string(), ":", line, ": text after the closing ']' of the JSON array the file ",
         "starts with (", n - pos, " bytes, not read). A JSON array file holds one array of rows; ",
         "a JSON Lines file holds one object a line, and its first line is not an array");
}

// Refuses a UTF-16 file by what its first bytes show: a byte order mark,
// or (without one) NUL as every other byte and never between, which is
// ASCII text in UTF-16. A UTF-8 file may hold a stray NUL (a bad row), but
// not one in every other byte, so it is never taken for UTF-16. Names the
// iconv encoding that reads it: "UTF-16" takes the mark; without one,
// glibc's iconv guesses the byte order, so it is named.
void refuse_utf16(const fs::path& file, std::ifstream& in) {
  // 16 bytes, 8 characters: enough to see the pattern, few enough to be
  // all ASCII at the start of a JSON file ('{"text":').
  unsigned char head[16] = {};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const size_t n = static_cast<size_t>(in.gcount()) & ~size_t{1};
  in.clear();
  in.seekg(0);
  std::string how, encoding;
  if (n >= 2 && head[0] == 0xFF && head[1] == 0xFE) {
    how = "little-endian, byte order mark FF FE";
    encoding = "UTF-16";
  } else if (n >= 2 && head[0] == 0xFE && head[1] == 0xFF) {
    how = "big-endian, byte order mark FE FF";
    encoding = "UTF-16";
  } else if (n >= 2) {
    bool little = true, big = true;
    for (size_t i = 0; i < n; i += 2) {
      little = little && head[i] != 0 && head[i + 1] == 0;
      big = big && head[i] == 0 && head[i + 1] != 0;
    }
    if (!little && !big) return;
    how = little ? "little-endian: every other byte is NUL" : "big-endian: every other byte is NUL";
    encoding = little ? "UTF-16LE" : "UTF-16BE";
  } else {
    return;
  }
  fs::path converted = file;
  converted.replace_extension(".utf8" + file.extension().string());
  fail(file.string(), " is UTF-16 (", how, "); convert it to UTF-8 (iconv -f ", encoding,
       " -t UTF-8 ", file.string(), " > ", converted.string(), ")");
}

// `file`'s extension in lower case (".csv").
std::string lower_extension(const fs::path& file) {
  std::string extension = file.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension;
}

// Where a conversion of `file` to JSON Lines may go: its name with the
// extension ".jsonl", or ".converted.jsonl" where that is its own name.
fs::path jsonl_beside(const fs::path& file) {
  fs::path out = file;
  out.replace_extension(".jsonl");
  if (out == file) out.replace_extension(".converted.jsonl");
  return out;
}

// The command that writes `file` decompressed beside it: `tool` ("gunzip
// -k") when the file's extension is `suffix` (".gz"), which it takes off;
// else `to_stdout` ("zcat"), into a name of our own.
std::string decompress_command(const fs::path& file, const std::string& tool,
                               const std::string& suffix, const std::string& to_stdout) {
  if (lower_extension(file) == suffix) {
    fs::path out = file;
    out.replace_extension();
    return fmt::format("{} {} (it writes {})", tool, file.string(), out.string());
  }
  fs::path out = file;
  out.replace_extension(".decompressed" + file.extension().string());
  return fmt::format("{} {} > {}", to_stdout, file.string(), out.string());
}

// Note [Files that are not text]: a Parquet, Arrow, gzip or zstd file
// (Hugging Face hands out the first two, and .jsonl.gz / .jsonl.zst
// downloads are common) read as JSON Lines failed on its first bytes with
// "not valid JSON" or "invalid UTF-8 (byte 0x8B ...)", which says nothing
// of what the file is. Their first bytes say it (the formats' magic
// numbers), so each is refused by name with the command that converts it;
// a CSV or TSV file, which has none, by its extension. Parquet and Arrow
// are not read: README.md, "Parquet and Arrow files are not read".
// Whether the file `in` reads ends with `magic` (a Parquet or Arrow file
// ends with its magic too, which a text starting with "PAR1" does not).
bool ends_with_magic(std::ifstream& in, std::string_view magic) {
  in.clear();
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  bool ends = false;
  if (size >= static_cast<std::streamoff>(2 * magic.size())) {
    std::string tail(magic.size(), '\0');
    in.seekg(size - static_cast<std::streamoff>(magic.size()));
    in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
    ends = in.gcount() == static_cast<std::streamsize>(tail.size()) && tail == magic;
  }
  in.clear();
  in.seekg(0);
  return ends;
}

void refuse_other_formats(const fs::path& file, std::ifstream& in) {
  unsigned char head[8] = {};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  const std::string_view start(reinterpret_cast<const char*>(head),
                               static_cast<size_t>(in.gcount()));
  in.clear();
  in.seekg(0);
  const std::string out = jsonl_beside(file).string();
  auto python = [&](const std::string& read) {
    return fmt::format("python3 -c 'import datasets; datasets.{}.to_json(\"{}\")'", read, out);
  };
  std::string what, convert;
  if (start.starts_with("PAR1") && ends_with_magic(in, "PAR1")) {
    what = "a Parquet file (it starts and ends with \"PAR1\")";
    convert = python(fmt::format("Dataset.from_parquet(\"{}\")", file.string()));
  } else if (start.starts_with("ARROW1") && ends_with_magic(in, "ARROW1")) {
    // The Arrow IPC file format (Feather 2), which datasets.Dataset.from_file does not read.
    what = "an Arrow IPC file (it starts and ends with \"ARROW1\")";
    convert = fmt::format(
        "python3 -c 'import pandas; pandas.read_feather(\"{}\").to_json(\"{}\", "
        "orient=\"records\", lines=True, force_ascii=False)'",
        file.string(), out);
  } else if (start.starts_with("\xFF\xFF\xFF\xFF")) {
    // The Arrow IPC stream format, each message after a continuation
    // marker: what Hugging Face datasets caches and save_to_disk write
    // (.arrow). A text file never starts with FF, which is not UTF-8.
    what = "an Arrow IPC stream (it starts with bytes FF FF FF FF), as Hugging Face datasets saves";
    convert = python(fmt::format("Dataset.from_file(\"{}\")", file.string()));
  } else if (start.starts_with("\x1F\x8B")) {
    what = "gzip-compressed (it starts with bytes 1F 8B)";
    convert = decompress_command(file, "gunzip -k", ".gz", "zcat");
  } else if (start.starts_with("\x28\xB5\x2F\xFD")) {
    what = "zstd-compressed (it starts with bytes 28 B5 2F FD)";
    convert = decompress_command(file, "zstd -d", ".zst", "zstd -dc");
  } else if (const std::string extension = lower_extension(file);
             extension == ".csv" || extension == ".tsv") {
    what = extension == ".csv" ? "a CSV file" : "a TSV file";
    convert = python(fmt::format("Dataset.from_csv(\"{}\"{})", file.string(),
                                 extension == ".tsv" ? ", sep=\"\\t\"" : ""));
  } else {
    return;
  }
  fail(file.string(), " is ", what,
       "; lazytrain reads JSON Lines, a JSON array or text (.txt). Convert it first: ", convert);
}

}  // namespace

SourceLayout detect_layout(const fs::path& file) {
  std::ifstream in = open(file);
  refuse_other_formats(file, in);
  refuse_utf16(file, in);
  const std::string extension = lower_extension(file);
  if (extension == ".txt") return SourceLayout::kTextParagraphs;
  char head[3] = {};
  in.read(head, 3);
  if (std::string_view(head, static_cast<size_t>(in.gcount())) != kByteOrderMark) {
    in.clear();
    in.seekg(0);
  }
  char c;
  while (in.get(c)) {
    if (!is_json_space(c)) return c == '[' ? SourceLayout::kJsonArray : SourceLayout::kJsonLines;
  }
  return SourceLayout::kJsonLines;
}

void for_each_row(const fs::path& file, SourceLayout layout,
                  const std::function<bool(const SourceRow&)>& on_row) {
  switch (layout) {
    case SourceLayout::kJsonLines:
      return read_lines(file, on_row);
    case SourceLayout::kJsonArray:
      return read_array(file, on_row);
    case SourceLayout::kTextParagraphs:
      return read_paragraphs(file, on_row);
  }
}

}  // namespace lt::data
