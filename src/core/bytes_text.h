#pragma once
// A byte count as a person reads it: "12.3 GB", "4.56 MB", "789 bytes"
// (decimal units, as the plan lines and the config's *_gb keys count), so
// that a tiny model's peak does not read "0.00 GB".
#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace lt {

inline std::string bytes_text(int64_t bytes) {
  if (bytes >= 1'000'000'000) return fmt::format("{:.2f} GB", static_cast<double>(bytes) / 1e9);
  if (bytes >= 1'000'000) return fmt::format("{:.2f} MB", static_cast<double>(bytes) / 1e6);
  return fmt::format("{} bytes", bytes);
}

}  // namespace lt
