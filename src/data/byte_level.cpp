#include "data/byte_level.h"

#include "data/unicode.h"

namespace lt::data {

namespace {

bool stands_for_itself(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

std::array<char32_t, 256> make_byte_level_chars() {
  std::array<char32_t, 256> chars{};
  char32_t next_stand_in = 256;
  for (int byte = 0; byte < 256; ++byte) {
    chars[byte] = stands_for_itself(byte) ? static_cast<char32_t>(byte) : next_stand_in++;
  }
  return chars;
}

// Inverse of byte_level_chars(): stand-ins are all below U+0144.
constexpr size_t kStandInLimit = 0x144;
std::array<int, kStandInLimit> make_byte_of_char() {
  std::array<int, kStandInLimit> byte_of{};
  byte_of.fill(-1);
  const auto& chars = byte_level_chars();
  for (int byte = 0; byte < 256; ++byte) byte_of[chars[byte]] = byte;
  return byte_of;
}

}  // namespace

const std::array<char32_t, 256>& byte_level_chars() {
  static const std::array<char32_t, 256> chars = make_byte_level_chars();
  return chars;
}

std::string byte_level_encode(std::string_view bytes) {
  const auto& chars = byte_level_chars();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char byte : bytes) append_utf8(out, chars[static_cast<unsigned char>(byte)]);
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  static const std::array<int, kStandInLimit> byte_of = make_byte_of_char();
  std::string out;
  out.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    DecodedChar ch = decode_utf8(token, pos);
    if (ch.code_point >= kStandInLimit || byte_of[ch.code_point] < 0) return std::nullopt;
    out.push_back(static_cast<char>(byte_of[ch.code_point]));
    pos += ch.length;
  }
  return out;
}

}  // namespace lt::data
