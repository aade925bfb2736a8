#include "data/token_rows.h"

#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/dataset_rows.h"
#include "data/dataset_source.h"

namespace lt::data {

std::vector<TokenRow> read_token_rows(const std::filesystem::path& path, int64_t vocab_size) {
  // Rows come through the dataset reader: regular files only, lines of
  // bounded length, and a JSON array of rows read as JSON lines are.
  const SourceLayout layout = detect_layout(path) == SourceLayout::kJsonArray
                                  ? SourceLayout::kJsonArray
                                  : SourceLayout::kJsonLines;
  std::vector<TokenRow> token_rows;
  for_each_row(path, layout, [&](const SourceRow& source) {
    const std::string where = path.string() + ":" + std::to_string(source.line);
    if (!source.problem.empty()) fail(where, ": ", source.problem);
    // Parsed as training parses a row (rows::parse_row): a key given twice
    // is refused, not read as its last value.
    rows::json j;
    try {
      j = rows::parse_row(source.text);
    } catch (const rows::json::parse_error& e) {
      fail(where, ": not valid JSON (", e.what(), ")");
    } catch (const rows::RowError& e) {
      fail(where, ": ", e.what);
    }
    LT_CHECK(j.is_object() && j.contains("input_ids"), where,
             ": expected an object with field \"input_ids\"");
    const auto& ids = j["input_ids"];
    LT_CHECK(ids.is_array(), where, ": field \"input_ids\" must be an array of integers");
    TokenRow row;
    row.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      LT_CHECK(ids[i].is_number_integer(), where, ": input_ids[", i, "] is not an integer");
      // Compared unsigned first: get<int64_t> wraps values above INT64_MAX.
      const bool huge = ids[i].is_number_unsigned() && ids[i].get<uint64_t>() > INT32_MAX;
      const int64_t id = huge ? int64_t{INT32_MAX} + 1 : ids[i].get<int64_t>();
      LT_CHECK(id >= 0 && id <= INT32_MAX && (vocab_size <= 0 || id < vocab_size), where,
               ": input_ids[", i, "] = ", ids[i].dump(), " is outside the vocabulary [0, ",
               vocab_size, ")");
      row.push_back(static_cast<int32_t>(id));
    }
    // The padding an attention_mask marks is not scored, as training does
    // not train on it.
    try {
      const auto [first, last] = rows::attended_span(j, row.size());
      row = TokenRow(row.begin() + first, row.begin() + last);
    } catch (const rows::RowError& e) {
      fail(where, ": field \"", e.field, "\": ", e.what);
    }
    token_rows.push_back(std::move(row));
    return true;
  });
  return token_rows;
}

}  // namespace lt::data
