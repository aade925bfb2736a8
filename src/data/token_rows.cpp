#include "data/token_rows.h"

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace lt::data {

std::vector<TokenRow> read_token_rows(const std::filesystem::path& path, int64_t vocab_size) {
  std::ifstream in(path, std::ios::binary);
  LT_CHECK(in.good(), path.string(), ": cannot open the file");
  std::vector<TokenRow> rows;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(line_no);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      fail(where, ": not valid JSON (", e.what(), ")");
    }
    LT_CHECK(j.is_object() && j.contains("input_ids"), where,
             ": expected an object with field \"input_ids\"");
    const auto& ids = j["input_ids"];
    LT_CHECK(ids.is_array(), where, ": field \"input_ids\" must be an array of integers");
    TokenRow row;
    row.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      LT_CHECK(ids[i].is_number_integer(), where, ": input_ids[", i, "] is not an integer");
      const int64_t id = ids[i].get<int64_t>();
      LT_CHECK(id >= 0 && id <= INT32_MAX && (vocab_size <= 0 || id < vocab_size), where,
               ": input_ids[", i, "] = ", id, " is outside the vocabulary [0, ", vocab_size, ")");
      row.push_back(static_cast<int32_t>(id));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace lt::data
