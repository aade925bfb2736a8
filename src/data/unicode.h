#pragma once
// The Unicode the tokenizer needs, without ICU: UTF-8 decoding, the
// character classes its pre-tokenizer patterns test (\p{L}, \p{N}, \s), NFC,
// and lossy UTF-8 repair for decoded bytes. The data comes from
// unicode_tables.cpp, generated to match Hugging Face `tokenizers` (see
// tools/gen_unicode_tables.py for which Unicode versions and why).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lt::data {

// The classes the known pre-tokenizer patterns distinguish. They are
// disjoint: kSpace is Oniguruma's \s (U+0009-000D, U+0085, Zs, Zl, Zp).
enum class CharClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

namespace detail {
// Bits 0-1: CharClass; bit 2: the code point can make NFC change a string.
uint8_t unicode_properties_slow(char32_t code_point);
constexpr uint8_t kNfcSensitiveBit = 4;
// ASCII classes, so the hot loop of the pre-tokenizer needs no table walk.
constexpr CharClass kAsciiClass[128] = {
#define O CharClass::kOther
#define L CharClass::kLetter
#define N CharClass::kNumber
#define S CharClass::kSpace
    O, O, O, O, O, O, O, O, O, S, S, S, S, S, O, O,  // 0x00: \t \n \v \f \r
    O, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O,  // 0x10
    S, O, O, O, O, O, O, O, O, O, O, O, O, O, O, O,  // 0x20: space
    N, N, N, N, N, N, N, N, N, N, O, O, O, O, O, O,  // 0x30: digits
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,  // 0x40
    L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O,  // 0x50
    O, L, L, L, L, L, L, L, L, L, L, L, L, L, L, L,  // 0x60
    L, L, L, L, L, L, L, L, L, L, L, O, O, O, O, O,  // 0x70
#undef O
#undef L
#undef N
#undef S
};
}  // namespace detail

// Code points past U+10FFFF (used for invalid bytes) are kOther.
inline CharClass char_class(char32_t code_point) {
  if (code_point < 128) return detail::kAsciiClass[code_point];
  return static_cast<CharClass>(detail::unicode_properties_slow(code_point) & 3);
}

// Stands for one byte that is not valid UTF-8.
constexpr char32_t kInvalidCodePoint = 0x110000;

// One decoded code point and how many bytes it took. A byte that does not
// start valid UTF-8 decodes alone as kInvalidCodePoint; the pre-tokenizer
// treats it as kOther so arbitrary bytes still tokenize.
struct DecodedChar {
  char32_t code_point;
  uint32_t length;
};

DecodedChar decode_utf8_multibyte(std::string_view text, size_t pos);

// Decodes the code point starting at text[pos]; pos < text.size().
inline DecodedChar decode_utf8(std::string_view text, size_t pos) {
  auto byte = static_cast<unsigned char>(text[pos]);
  if (byte < 0x80) return {byte, 1};
  return decode_utf8_multibyte(text, pos);
}

void append_utf8(std::string& out, char32_t code_point);

// Whether Hugging Face tokenizers counts the code point as a word character
// around a single_word added token (its Rust regex \w: Alphabetic, marks,
// decimal digits, connector punctuation, the joiners; not "\u00b2").
bool is_word_char(char32_t code_point);

// True if `text` is well-formed UTF-8 (no overlongs, surrogates or values
// past U+10FFFF).
bool is_valid_utf8(std::string_view text);

// Replaces each maximal ill-formed subsequence with U+FFFD, as Rust's
// String::from_utf8_lossy (and Python's errors="replace") do.
std::string utf8_lossy(std::string_view bytes);

// Canonical combining class (Unicode 9.0 data, like HF tokenizers' NFC).
uint8_t combining_class(char32_t code_point);

// Unicode Normalization Form C. Invalid UTF-8 bytes pass through unchanged
// and act as starters. Returns false and leaves `out` untouched when `text`
// is already in NFC (the common case: no copy is made).
bool nfc_if_changed(std::string_view text, std::string& out);
std::string nfc(std::string_view text);

}  // namespace lt::data
