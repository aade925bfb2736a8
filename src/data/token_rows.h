#pragma once
// Pre-tokenized datasets: JSONL with one {"input_ids": [...]} per line.
// This is the format `lazytrain eval` reads and `tokens` datasets use.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace lt::data {

using TokenRow = std::vector<int32_t>;

// Reads every non-blank line. A malformed line is an lt::Error naming the
// file, the line and the field. When `vocab_size` > 0, every id must lie in
// [0, vocab_size).
std::vector<TokenRow> read_token_rows(const std::filesystem::path& path, int64_t vocab_size = 0);

}  // namespace lt::data
