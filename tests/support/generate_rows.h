#pragma once
// The rows of `lazytrain generate --json`'s stdout: one object per line,
// one per row (with "row") in row order, then one holding the speed.
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace lt::testing {

inline std::vector<nlohmann::json> generated_rows(const std::string& out) {
  std::vector<nlohmann::json> rows;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("row")) rows.push_back(std::move(j));
  }
  return rows;
}

}  // namespace lt::testing
