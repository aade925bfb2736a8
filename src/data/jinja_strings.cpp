#include "data/jinja_strings.h"

#include <cctype>

#include "core/error.h"
#include "data/unicode.h"

namespace lt::data::jinja {

namespace {

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

struct CodePoint {
  size_t begin, end;
  char32_t value;
};

std::vector<CodePoint> decode_all(std::string_view text) {
  std::vector<CodePoint> out;
  for (size_t pos = 0; pos < text.size();) {
    DecodedChar c = decode_utf8(text, pos);
    out.push_back({pos, pos + c.length, c.code_point});
    pos += c.length;
  }
  return out;
}

}  // namespace

std::vector<std::string> code_points(std::string_view text) {
  std::vector<std::string> out;
  for (const CodePoint& c : decode_all(text))
    out.emplace_back(text.substr(c.begin, c.end - c.begin));
  return out;
}

size_t code_point_count(std::string_view text) {
  size_t n = 0;
  for (size_t pos = 0; pos < text.size(); ++n) pos += decode_utf8(text, pos).length;
  return n;
}

std::string strip(std::string_view text, const std::optional<std::string>& chars, StripSide side) {
  const std::vector<CodePoint> cps = decode_all(text);
  std::vector<char32_t> set;
  if (chars) {
    for (const CodePoint& c : decode_all(*chars)) set.push_back(c.value);
  }
  auto stripped = [&](char32_t c) {
    if (!chars) return is_python_space(c);
    for (char32_t s : set) {
      if (s == c) return true;
    }
    return false;
  };
  size_t first = 0, last = cps.size();
  if (side != StripSide::kRight) {
    while (first < last && stripped(cps[first].value)) ++first;
  }
  if (side != StripSide::kLeft) {
    while (last > first && stripped(cps[last - 1].value)) --last;
  }
  if (first == last) return "";
  return std::string(text.substr(cps[first].begin, cps[last - 1].end - cps[first].begin));
}

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep,
                               int64_t max_split) {
  std::vector<std::string> parts;
  if (sep) {
    LT_CHECK(!sep->empty(), "split: empty separator");
    size_t start = 0;
    while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
      const size_t at = text.find(*sep, start);
      if (at == std::string_view::npos) break;
      parts.emplace_back(text.substr(start, at - start));
      start = at + sep->size();
    }
    parts.emplace_back(text.substr(start));
    return parts;
  }
  const std::vector<CodePoint> cps = decode_all(text);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_python_space(cps[i].value)) ++i;
    if (i == cps.size()) break;
    if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
      // The rest, less its trailing whitespace, is the last part.
      parts.push_back(strip(text.substr(cps[i].begin), std::nullopt, StripSide::kRight));
      break;
    }
    const size_t begin = i;
    while (i < cps.size() && !is_python_space(cps[i].value)) ++i;
    parts.emplace_back(text.substr(cps[begin].begin, cps[i - 1].end - cps[begin].begin));
  }
  return parts;
}

std::string ascii_upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string title_case(std::string_view text) {
  std::string out(text);
  bool previous_letter = false;
  for (char& c : out) {
    const bool letter = std::isalpha(static_cast<unsigned char>(c)) != 0;
    if (letter) {
      c = static_cast<char>(previous_letter ? std::tolower(static_cast<unsigned char>(c))
                                            : std::toupper(static_cast<unsigned char>(c)));
    }
    previous_letter = letter;
  }
  return out;
}

std::string jinja_title(std::string_view text) {
  // jinja2's do_title splits on the regex ([-\s({\[<]+) and writes each piece
  // as piece[0].upper() + piece[1:].lower(): a word starts only after
  // whitespace, '-', '(', '{', '[' or '<', so "<|im_end|>" keeps its case.
  auto starts_word_after = [](char32_t c) {
    return is_python_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::string out;
  out.reserve(text.size());
  bool word_start = true;
  for (const CodePoint& c : decode_all(text)) {
    const std::string_view bytes = text.substr(c.begin, c.end - c.begin);
    if (starts_word_after(c.value)) {
      out += bytes;
      word_start = true;
    } else {
      out += word_start ? ascii_upper(bytes) : ascii_lower(bytes);
      word_start = false;
    }
  }
  return out;
}

std::string capitalize(std::string_view text) {
  std::string out = ascii_lower(text);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string replace(std::string_view text, std::string_view old, std::string_view with,
                    int64_t count) {
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  if (old.empty()) {
    // Python inserts `with` between code points (and at both ends).
    for (const std::string& cp : code_points(text)) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      out += cp;
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  while (count < 0 || done < count) {
    const size_t at = text.find(old, start);
    if (at == std::string_view::npos) break;
    out += text.substr(start, at - start);
    out += with;
    start = at + old.size();
    ++done;
  }
  out += text.substr(start);
  return out;
}

}  // namespace lt::data::jinja
