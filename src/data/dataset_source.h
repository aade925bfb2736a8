#pragma once
// The rows of a dataset file, each with the line it starts on, before any
// meaning is given to them (dataset.h does that).
//
//   JSONL        one row per non-blank line;
//   JSON array   one row per element of a top-level [...]; chosen when the
//                file's first non-space character is '[';
//   text (.txt)  one row per paragraph: a run of non-blank lines, separated
//                from the next by one or more blank (or whitespace-only)
//                lines; the row is the paragraph's lines joined by '\n',
//                without the final one ("\r\n" and a lone '\r' read as
//                '\n', as Python's universal newlines).
//
// A JSON array is cut into elements by a scan that knows strings and
// brackets, so that each element parses alone: one broken element is one bad
// row, and every row still has its line. A break in the array's own
// structure (an unterminated string, a missing ']') ends the reading with a
// problem row.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace lt::data {

enum class SourceLayout { kJsonLines, kJsonArray, kTextParagraphs };

struct SourceRow {
  int64_t line = 0;       // 1-based line where the row starts
  std::string_view text;  // the row's bytes; valid only during the callback
  std::string problem;    // non-empty: the row could not be cut out (text may be partial)
};

// The longest line a JSON-lines file may have: 64 MiB, some 16M tokens of
// text or 8M token ids, far beyond any row a model trains on. JSON lines
// are read a line at a time, so without a bound one huge line (a file of
// zeros, a binary file given by mistake) was read whole into memory.
inline constexpr size_t kMaxLineBytes = size_t{64} << 20;

// Text paragraphs for a .txt file (any case), else JSON array or lines by
// the first non-space character (a UTF-8 byte order mark is skipped).
// Every reader here refuses a file that is not a regular file
// (io/regular_file.h), before opening it. A UTF-16 file (a UTF-16 byte
// order mark, or NUL as every other byte of its start) is an lt::Error
// saying so and giving the iconv command that converts it to UTF-8: read
// as UTF-8, each of its rows would be skipped as invalid, or a .txt
// file's text trained on with its NULs. A Parquet, Arrow (IPC file or
// stream), gzip or zstd file (by its first bytes, whatever its name) and a
// .csv or .tsv file are lt::Errors naming what the file is and the command
// that converts it (Note [Files that are not text]).
SourceLayout detect_layout(const std::filesystem::path& file);

// Calls `on_row` for every row in file order until it returns false. A file
// that cannot be opened or read, or a JSON-lines line longer than
// kMaxLineBytes, is an lt::Error naming the file (and the line).
void for_each_row(const std::filesystem::path& file, SourceLayout layout,
                  const std::function<bool(const SourceRow&)>& on_row);

}  // namespace lt::data
