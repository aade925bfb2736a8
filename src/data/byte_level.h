#pragma once
// GPT-2's byte-level alphabet: every byte has a printable stand-in character
// so a vocabulary of strings can hold arbitrary bytes. Bytes that are
// printable Latin-1 (!..~, ¡..¬, ®..ÿ) stand for themselves; the other 68
// map to U+0100 onwards in byte order. Tokens in tokenizer.json and
// encoder.json are written in this alphabet.
#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace lt::data {

// The stand-in character of each byte.
const std::array<char32_t, 256>& byte_level_chars();

// The UTF-8 spelling of a byte's stand-in character.
std::string byte_level_encode(std::string_view bytes);

// The bytes a token string in the byte-level alphabet stands for, or nullopt
// if a character of it is outside the alphabet.
std::optional<std::string> byte_level_decode(std::string_view token);

}  // namespace lt::data
