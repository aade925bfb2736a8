#include "data/jinja_strings.h"

#include <algorithm>

#include "core/error.h"
#include "data/case_tables.h"
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

bool in_spans(const case_tables::CodePointSpan* spans, size_t count, char32_t c) {
  const case_tables::CodePointSpan* after = std::upper_bound(
      spans, spans + count, c,
      [](char32_t value, const case_tables::CodePointSpan& span) { return value < span.first; });
  return after != spans && c <= (after - 1)->last;
}

bool is_cased(char32_t c) {
  return in_spans(case_tables::kCasedSpans, case_tables::kCasedSpanCount, c);
}

bool is_case_ignorable(char32_t c) {
  return in_spans(case_tables::kCaseIgnorableSpans, case_tables::kCaseIgnorableSpanCount, c);
}

// Appends what `mapping` maps the valid code point `c` to, as UTF-8.
void append_mapped(const case_tables::CaseMapping& mapping, char32_t c, std::string& out) {
  const case_tables::CaseRun* runs_end = mapping.runs + mapping.run_count;
  const case_tables::CaseRun* run = std::upper_bound(
      mapping.runs, runs_end, c,
      [](char32_t value, const case_tables::CaseRun& r) { return value < r.first; });
  if (run != mapping.runs) {
    --run;
    if (c <= run->last && (c - run->first) % run->stride == 0) {
      append_utf8(out, static_cast<char32_t>(static_cast<int64_t>(c) + run->delta));
      return;
    }
  }
  const case_tables::CaseExpansion* expansions_end = mapping.expansions + mapping.expansion_count;
  const case_tables::CaseExpansion* expansion = std::lower_bound(
      mapping.expansions, expansions_end, c,
      [](const case_tables::CaseExpansion& e, char32_t value) { return e.code_point < value; });
  if (expansion != expansions_end && expansion->code_point == c) {
    for (size_t k = 0; k < expansion->length; ++k)
      append_utf8(out, case_tables::kCaseExpansionData[expansion->offset + k]);
    return;
  }
  append_utf8(out, c);
}

// Capital sigma lowers to final sigma (U+03C2) in Unicode's Final_Sigma
// context: a cased character before it and none after it, case-ignorable
// characters skipped on both sides ("ΟΔΟΣ." gives "οδος.", "Σ" alone
// gives "σ"). Python applies it in lower(), and so in title() and
// capitalize() (CPython's handle_capital_sigma).
char32_t lower_sigma(const std::vector<CodePoint>& cps, size_t i) {
  size_t before = i;
  while (before > 0 && is_case_ignorable(cps[before - 1].value)) --before;
  if (before == 0 || !is_cased(cps[before - 1].value)) return 0x3C3;
  size_t after = i + 1;
  while (after < cps.size() && is_case_ignorable(cps[after].value)) ++after;
  return after < cps.size() && is_cased(cps[after].value) ? 0x3C3 : 0x3C2;
}

enum class Case { kUpper, kLower, kTitle };

// Appends cps[i] of `text` in case `to` as Python maps it; an invalid byte is
// copied as it is.
void append_case(std::string_view text, const std::vector<CodePoint>& cps, size_t i, Case to,
                 std::string& out) {
  const CodePoint& c = cps[i];
  if (c.value == kInvalidCodePoint) {
    out += text.substr(c.begin, c.end - c.begin);
  } else if (to == Case::kLower && c.value == 0x3A3) {
    append_utf8(out, lower_sigma(cps, i));
  } else {
    append_mapped(to == Case::kUpper   ? case_tables::kUpper
                  : to == Case::kLower ? case_tables::kLower
                                       : case_tables::kTitle,
                  c.value, out);
  }
}

// `text` with each code point i in the case case_at(code points, i) picks.
template <typename CaseAt>
std::string map_case(std::string_view text, CaseAt case_at) {
  const std::vector<CodePoint> cps = decode_all(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < cps.size(); ++i) append_case(text, cps, i, case_at(cps, i), out);
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

std::string upper(std::string_view text) {
  return map_case(text, [](const std::vector<CodePoint>&, size_t) { return Case::kUpper; });
}

std::string lower(std::string_view text) {
  return map_case(text, [](const std::vector<CodePoint>&, size_t) { return Case::kLower; });
}

std::string title(std::string_view text) {
  // CPython's do_title: a character after a cased one is lowered, any other
  // is title-cased ("o'neil" is "O'Neil": the apostrophe is not cased).
  return map_case(text, [](const std::vector<CodePoint>& cps, size_t i) {
    return i > 0 && is_cased(cps[i - 1].value) ? Case::kLower : Case::kTitle;
  });
}

std::string capitalize(std::string_view text) {
  return map_case(text, [](const std::vector<CodePoint>&, size_t i) {
    return i == 0 ? Case::kTitle : Case::kLower;
  });
}

std::string jinja_title(std::string_view text) {
  // jinja2's do_title splits on the regex ([-\s({\[<]+) and writes each piece
  // as piece[0].upper() + piece[1:].lower(): a word starts only after
  // whitespace, '-', '(', '{', '[' or '<', so "<|im_end|>" keeps its case.
  // piece[1:] is lowered as a string of its own, so a sigma there does not
  // see the word's first letter ("ΑΣ" gives "Ασ", where "ΑΣ".title() gives
  // "Ας"). The separators have no case and are copied.
  auto starts_word_after = [](char32_t c) {
    return is_python_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
  };
  std::string out;
  out.reserve(text.size());
  size_t word_begin = std::string_view::npos;
  auto end_word = [&](size_t word_end) {
    if (word_begin == std::string_view::npos) return;
    const std::string_view word = text.substr(word_begin, word_end - word_begin);
    const size_t first_length = decode_utf8(word, 0).length;
    out += upper(word.substr(0, first_length));
    out += lower(word.substr(first_length));
    word_begin = std::string_view::npos;
  };
  for (const CodePoint& c : decode_all(text)) {
    if (starts_word_after(c.value)) {
      end_word(c.begin);
      out += text.substr(c.begin, c.end - c.begin);
    } else if (word_begin == std::string_view::npos) {
      word_begin = c.begin;
    }
  }
  end_word(text.size());
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
