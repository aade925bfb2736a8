#include "io/tfrecord.h"

#include <array>

#include "core/error.h"

namespace lt::io {

namespace {

constexpr uint32_t kCastagnoliReflected = 0x82F63B78u;
constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;
constexpr size_t kHeaderBytes = 12;  // uint64 length + its masked CRC
constexpr size_t kFooterBytes = 4;   // the data's masked CRC

// The byte-at-a-time table: entry b is the CRC register after shifting b
// through eight steps of the reflected polynomial. Event files are a few
// hundred bytes a step, so this is fast enough and needs no SSE4.2.
constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = (r & 1u) ? (r >> 1) ^ kCastagnoliReflected : r >> 1;
    table[b] = r;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

void append_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xffu));
}

uint64_t read_le(std::string_view bytes, size_t at, int n) {
  uint64_t value = 0;
  for (int i = 0; i < n; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return value;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  uint32_t crc = 0xffffffffu;
  for (const char c : bytes)
    crc = kCrcTable[(crc ^ static_cast<unsigned char>(c)) & 0xffu] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta;
}

std::string tfrecord_frame(std::string_view data) {
  std::string record;
  record.reserve(kHeaderBytes + data.size() + kFooterBytes);
  append_le(record, data.size(), 8);
  append_le(record, masked_crc32c(record), 4);
  record.append(data);
  append_le(record, masked_crc32c(data), 4);
  return record;
}

std::vector<std::string> read_tfrecords(std::string_view file, const std::string& what) {
  std::vector<std::string> records;
  size_t at = 0;
  while (file.size() - at >= kHeaderBytes) {
    const std::string_view length_bytes = file.substr(at, 8);
    LT_CHECK(read_le(file, at + 8, 4) == masked_crc32c(length_bytes), what, ": record ",
             records.size(), " at byte ", at, ": the length's CRC does not match");
    const uint64_t length = read_le(file, at, 8);
    const uint64_t left = file.size() - at - kHeaderBytes;
    if (length > left || left - length < kFooterBytes) break;  // cut short
    const std::string_view data = file.substr(at + kHeaderBytes, length);
    LT_CHECK(read_le(file, at + kHeaderBytes + length, 4) == masked_crc32c(data), what, ": record ",
             records.size(), " at byte ", at, ": the data's CRC does not match");
    records.emplace_back(data);
    at += kHeaderBytes + length + kFooterBytes;
  }
  return records;
}

}  // namespace lt::io
