#pragma once
// The first step of reading a chat template: cut the source into text,
// {{ output }} and {% tag %} pieces, each tag's expression into tokens.
//
// Whitespace is settled here, as jinja2 settles it with the settings
// transformers renders chat templates with (trim_blocks=True,
// lstrip_blocks=True):
//   - "{%-", "{{-", "{#-" remove all whitespace before the tag, "-%}",
//     "-}}", "-#}" all whitespace after it;
//   - trim_blocks: the first newline after a "%}" or "#}" is removed;
//   - lstrip_blocks: spaces and tabs from the start of a line up to a
//     "{%" or "{#" are removed ("{%+" keeps them).
// {# comments #} leave nothing but their whitespace effects.
#include <string>
#include <string_view>
#include <vector>

namespace lt::data::jinja {

enum class TokenKind { kName, kString, kInteger, kFloat, kOperator };

struct Token {
  TokenKind kind;
  std::string text;  // a string literal's text with its escapes resolved
  int line;
};

enum class PieceKind { kText, kOutput, kTag };

struct Piece {
  PieceKind kind;
  std::string text;           // kText
  std::vector<Token> tokens;  // kOutput, kTag
  int line;                   // 1-based, where the piece starts
};

// A malformed piece (an unclosed tag or string, a stray character) is an
// lt::Error naming `source_name` and the line.
std::vector<Piece> lex(std::string_view source, const std::string& source_name);

}  // namespace lt::data::jinja
