#pragma once
// Pre-tokenized datasets: JSONL with one {"input_ids": [...]} per line (or
// a JSON array of such rows). This is what `lazytrain eval --format tokens`
// reads; a "labels" field is not read.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace lt::data {

using TokenRow = std::vector<int32_t>;

// Reads every non-blank line. A malformed line is an lt::Error naming the
// file, the line and the field, as are a file that is not regular and a
// line longer than kMaxLineBytes (dataset_source.h). When `vocab_size` > 0,
// every id must lie in [0, vocab_size).
std::vector<TokenRow> read_token_rows(const std::filesystem::path& path, int64_t vocab_size = 0);

}  // namespace lt::data
