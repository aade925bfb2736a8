#include "data/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "data/jinja_numbers.h"
#include "data/unicode.h"

namespace lt::data::jinja {

namespace {

// Digits that `is_digit` accepts from `at`, with single '_' between two of
// them (jinja2's "(\\d+_)*\\d+"); returns the end.
template <typename IsDigit>
size_t digits_end(std::string_view s, size_t at, IsDigit is_digit) {
  size_t end = at;
  while (end < s.size()) {
    if (is_digit(s[end])) {
      ++end;
    } else if (s[end] == '_' && end > at && is_digit(s[end - 1]) && end + 1 < s.size() &&
               is_digit(s[end + 1])) {
      ++end;
    } else {
      break;
    }
  }
  return end;
}

bool is_decimal(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) != 0;
}

// jinja2's number literals from `pos` (a digit): 0b/0o/0x integers,
// decimal integers, and floats with a fraction and/or an exponent, digits
// grouped by '_'. The end and the kind.
std::pair<size_t, TokenKind> lex_number(std::string_view s, size_t pos) {
  if (s[pos] == '0' && pos + 2 < s.size()) {
    const char letter = static_cast<char>(std::tolower(static_cast<unsigned char>(s[pos + 1])));
    const int base = letter == 'b' ? 2 : letter == 'o' ? 8 : letter == 'x' ? 16 : 0;
    const auto in_base = [base](char ch) { return digit_value(ch) < base; };
    const size_t first = pos + 2 + (s[pos + 2] == '_' ? 1 : 0);
    if (base != 0 && first < s.size() && in_base(s[first]))
      return {digits_end(s, first, in_base), TokenKind::kInteger};
  }
  size_t end = digits_end(s, pos, is_decimal);
  TokenKind kind = TokenKind::kInteger;
  // After a '.', jinja2 takes no float (its "(?<!\\.)"): x.0.1 is x[0][1].
  if (pos > 0 && s[pos - 1] == '.') return {end, kind};
  if (end + 1 < s.size() && s[end] == '.' && is_decimal(s[end + 1])) {
    kind = TokenKind::kFloat;
    end = digits_end(s, end + 1, is_decimal);
  }
  if (end + 1 < s.size() && (s[end] == 'e' || s[end] == 'E')) {
    const size_t sign = end + 1 + ((s[end + 1] == '+' || s[end + 1] == '-') ? 1 : 0);
    if (sign < s.size() && is_decimal(s[sign])) {
      kind = TokenKind::kFloat;
      end = digits_end(s, sign, is_decimal);
    }
  }
  return {end, kind};
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// How the text before a tag is cut: which of its characters are kept.
struct Cut {
  size_t begin, end;
};

// What the tag that ended the previous text asked of the text after it.
enum class AfterTag { kNothing, kStripAll, kDropNewline };

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& name) : src_(source), name_(name) {}

  std::vector<Piece> run() {
    size_t pos = 0;
    AfterTag after = AfterTag::kNothing;
    while (pos < src_.size()) {
      const size_t open = find_open(pos);
      const size_t text_end = open == std::string_view::npos ? src_.size() : open;
      if (open == std::string_view::npos) {
        emit_text(pos, text_end, after, false, false);
        break;
      }
      const char kind = src_[open + 1];  // '{', '%' or '#'
      const char marker = open + 2 < src_.size() ? src_[open + 2] : '\0';
      const bool block = kind != '{';
      emit_text(pos, text_end, after, marker == '-', block && marker != '+');
      size_t body = open + 2 + ((marker == '-' || marker == '+') ? 1 : 0);
      if (kind == '#') {
        const size_t close = src_.find("#}", body);
        if (close == std::string_view::npos) fail_at(open, "a {# comment is never closed by #}");
        after =
            close > body && src_[close - 1] == '-' ? AfterTag::kStripAll : AfterTag::kDropNewline;
        pos = close + 2;
        continue;
      }
      Piece piece{kind == '{' ? PieceKind::kOutput : PieceKind::kTag, "", {}, line_of(open)};
      pos = lex_tokens(body, kind, piece.tokens, after);
      if (piece.tokens.empty()) fail_at(open, "an empty ", kind == '{' ? "{{ }}" : "{% %}");
      pieces_.push_back(std::move(piece));
    }
    return std::move(pieces_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string_view::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string_view::npos;
  }

  // The text [begin, end) with the whitespace rules of the tags around it.
  void emit_text(size_t begin, size_t end, AfterTag after, bool strip_before_tag,
                 bool lstrip_before_block) {
    Cut cut{begin, end};
    // lstrip_blocks looks at the source's own lines, before any trimming.
    if (lstrip_before_block) {
      size_t line_start = end;
      while (line_start > begin && (src_[line_start - 1] == ' ' || src_[line_start - 1] == '\t')) {
        --line_start;
      }
      const bool at_line_start = line_start == 0 || src_[line_start - 1] == '\n';
      if (at_line_start) cut.end = line_start;
    }
    if (strip_before_tag) {
      while (cut.end > cut.begin && is_space(src_[cut.end - 1])) --cut.end;
    }
    if (after == AfterTag::kStripAll) {
      while (cut.begin < cut.end && is_space(src_[cut.begin])) ++cut.begin;
    } else if (after == AfterTag::kDropNewline && cut.begin < end && src_[cut.begin] == '\n') {
      ++cut.begin;
    }
    if (cut.begin < cut.end) {
      pieces_.push_back({PieceKind::kText,
                         std::string(src_.substr(cut.begin, cut.end - cut.begin)),
                         {},
                         line_of(begin)});
    }
  }

  // Tokens from `pos` to the tag's close; returns the position after it.
  size_t lex_tokens(size_t pos, char kind, std::vector<Token>& tokens, AfterTag& after) {
    const char closer = kind == '{' ? '}' : '%';
    int depth = 0;  // open brackets: "}}" inside {'a': {'b': 1}} does not close
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size()) fail_at(pos, "a tag is never closed");
      const char c = src_[pos];
      if (depth == 0) {
        const bool dash = c == '-' || (c == '+' && kind == '%');
        const size_t at = dash ? pos + 1 : pos;
        if (at + 1 < src_.size() && src_[at] == closer && src_[at + 1] == '}') {
          if (c == '-') {
            after = AfterTag::kStripAll;
          } else {
            after = kind == '{' || c == '+' ? AfterTag::kNothing : AfterTag::kDropNewline;
          }
          return at + 2;
        }
      }
      const int line = line_of(pos);
      if (is_name_start(c)) {
        size_t end = pos;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        tokens.push_back({TokenKind::kName, std::string(src_.substr(pos, end - pos)), line});
        pos = end;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        const auto [end, number] = lex_number(src_, pos);
        tokens.push_back({number, std::string(src_.substr(pos, end - pos)), line});
        pos = end;
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos, tokens);
      } else {
        static constexpr std::string_view kPairs[] = {"==", "!=", "<=", ">=", "//", "**"};
        std::string_view two = src_.substr(pos, 2);
        if (std::find(std::begin(kPairs), std::end(kPairs), two) != std::end(kPairs)) {
          tokens.push_back({TokenKind::kOperator, std::string(two), line});
          pos += 2;
          continue;
        }
        if (std::string_view("+-*/%~<>=()[]{}.,:|").find(c) == std::string_view::npos) {
          fail_at(pos, "unexpected character '", std::string(1, c), "'");
        }
        if (c == '(' || c == '[' || c == '{') ++depth;
        if (c == ')' || c == ']' || c == '}') --depth;
        tokens.push_back({TokenKind::kOperator, std::string(1, c), line});
        ++pos;
      }
    }
  }

  // A quoted literal, its escapes decoded as jinja2 decodes them (Python's
  // unicode-escape): \n \t \r \a \b \f \v, octal, \xHH, \uHHHH,
  // \UHHHHHHHH, a backslash before a newline dropped; any other escape kept
  // as written. \N{NAME} (a Unicode name) is refused: no name table here.
  size_t lex_string(size_t pos, std::vector<Token>& tokens) {
    const char quote = src_[pos];
    const int line = line_of(pos);
    std::string text;
    size_t i = pos + 1;
    for (; i < src_.size() && src_[i] != quote; ++i) {
      if (src_[i] != '\\' || i + 1 >= src_.size()) {
        text += src_[i];
        continue;
      }
      const size_t escape = i;
      const char e = src_[++i];
      switch (e) {
        case 'n':
          text += '\n';
          break;
        case 't':
          text += '\t';
          break;
        case 'r':
          text += '\r';
          break;
        case 'a':
          text += '\a';
          break;
        case 'b':
          text += '\b';
          break;
        case 'f':
          text += '\f';
          break;
        case 'v':
          text += '\v';
          break;
        case '\n':
          break;  // a line continued
        case '\\':
        case '\'':
        case '"':
          text += e;
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t code_point = 0;
          for (size_t k = 1; k <= digits; ++k) {
            const char h = i + k < src_.size() ? src_[i + k] : '\0';
            if (!std::isxdigit(static_cast<unsigned char>(h)))
              fail_at(escape, "a \\", e, " escape needs ", digits, " hex digits");
            code_point =
                code_point * 16 +
                static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h))
                                          ? h - '0'
                                          : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
          }
          if (code_point > 0x10FFFF || (code_point >= 0xD800 && code_point < 0xE000))
            fail_at(escape, "the \\", e, " escape names no character");
          append_utf8(text, code_point);
          i += digits;
          break;
        }
        case 'N':
          fail_at(escape,
                  "\\N{...} escapes (characters by name) are not supported; write the "
                  "character or its \\u escape");
        default:
          if (e >= '0' && e <= '7') {  // up to three octal digits
            char32_t code_point = static_cast<char32_t>(e - '0');
            for (int k = 0;
                 k < 2 && i + 1 < src_.size() && src_[i + 1] >= '0' && src_[i + 1] <= '7'; ++k)
              code_point = code_point * 8 + static_cast<char32_t>(src_[++i] - '0');
            append_utf8(text, code_point);
            break;
          }
          text += '\\';
          text += e;
      }
    }
    if (i >= src_.size()) fail_at(pos, "a string literal is never closed");
    tokens.push_back({TokenKind::kString, std::move(text), line});
    return i + 1;
  }

  // Lines are counted on from the last position asked about: the lexer
  // asks in increasing order, so the whole count is one pass.
  int line_of(size_t pos) const {
    if (pos < counted_to_) {
      counted_to_ = 0;
      counted_line_ = 1;
    }
    counted_line_ += static_cast<int>(std::count(src_.begin() + static_cast<long>(counted_to_),
                                                 src_.begin() + static_cast<long>(pos), '\n'));
    counted_to_ = pos;
    return counted_line_;
  }

  template <typename... Args>
  [[noreturn]] void fail_at(size_t pos, const Args&... what) const {
    fail(name_, ":", line_of(pos), ": ", what...);
  }

  std::string_view src_;
  const std::string& name_;
  std::vector<Piece> pieces_;
  mutable size_t counted_to_ = 0;
  mutable int counted_line_ = 1;
};

}  // namespace

std::vector<Piece> lex(std::string_view source, const std::string& source_name) {
  return Lexer(source, source_name).run();
}

}  // namespace lt::data::jinja
